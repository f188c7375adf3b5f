import { api } from './api.js';
import { h, field, problem, announce, when, show } from './dom.js';
import { secretPanel } from './secret.js';
import { atLeast } from './projects.js';

const badge = (status) => h('span', { class: `badge s-${status}` }, status);

// onRunEvent hands a task.run.* event to the open view.
export function onRunEvent(event, run, view) {
  view?.onRun?.(run);
  announce(`Run of task ${run.task_id.slice(0, 8)} ${run.status}`);
}

// taskForm edits the writable fields of a task; submit gets the body.
function taskForm({ task, submitLabel, onSubmit, onCancel }) {
  const t = task || { action: { type: 'webhook', method: 'POST' }, timezone: 'UTC', overlap: 'skip', max_attempts: 3, timeout_seconds: 30, active: true };
  const a = t.action || {};
  const name = h('input', { name: 'name', required: true, maxlength: 200, value: t.name || '' });
  const schedule = h('input', { name: 'schedule', value: t.schedule ?? '', placeholder: '*/5 * * * *', autocomplete: 'off', spellcheck: 'false' });
  const tz = h('input', { name: 'timezone', value: t.timezone || 'UTC', autocomplete: 'off' });
  const type = h('select', { name: 'type' }, h('option', { value: 'webhook' }, 'Call a webhook'), h('option', { value: 'publish' }, 'Publish a realtime event'));
  type.value = a.type || 'webhook';
  const url = h('input', { name: 'url', type: 'url', value: a.url || '', placeholder: 'https://example.com/hook' });
  const method = h('select', { name: 'method' }, ['POST', 'PUT', 'PATCH', 'GET', 'DELETE'].map((m) => h('option', { value: m }, m)));
  method.value = a.method || 'POST';
  const event = h('input', { name: 'event', value: a.event || '', placeholder: 'report.ready' });
  const room = h('input', { name: 'room', value: a.room || '', placeholder: 'empty: to you' });
  const overlap = h('select', { name: 'overlap' }, h('option', { value: 'skip' }, 'skip: no new run while one is active'), h('option', { value: 'allow' }, 'allow'));
  overlap.value = t.overlap || 'skip';
  const attempts = h('input', { name: 'max_attempts', type: 'number', min: 1, max: 25, value: t.max_attempts || 3 });
  const timeout = h('input', { name: 'timeout_seconds', type: 'number', min: 1, max: 600, value: t.timeout_seconds || 30 });
  const active = h('input', { name: 'active', type: 'checkbox', checked: t.active !== false });
  const webhook = h('fieldset', { class: 'group' }, h('legend', {}, 'Webhook'), field('URL', url), field('Method', method));
  const publish = h('fieldset', { class: 'group' }, h('legend', {}, 'Publish'), field('Event name', event), field('Room', room, 'Leave empty to send it to yourself.'));
  const sync = () => { webhook.hidden = type.value !== 'webhook'; publish.hidden = type.value !== 'publish'; };
  type.addEventListener('change', sync);
  sync();
  const out = h('div', { class: 'result' });
  const form = h('form', { class: 'card form', onsubmit: async (e) => {
    e.preventDefault();
    const action = type.value === 'webhook'
      ? { ...(a.type === 'webhook' ? a : {}), type: 'webhook', url: url.value, method: method.value }
      : { ...(a.type === 'publish' ? a : {}), type: 'publish', event: event.value, ...(room.value ? { room: room.value } : {}) };
    if (type.value === 'webhook') { delete action.event; delete action.room; delete action.payload; }
    else { delete action.url; delete action.method; delete action.headers; delete action.body; if (!room.value) delete action.room; }
    const body = {
      name: name.value, timezone: tz.value || 'UTC', action, overlap: overlap.value,
      max_attempts: Number(attempts.value), timeout_seconds: Number(timeout.value), active: active.checked,
    };
    if (schedule.value.trim() !== '') body.schedule = schedule.value.trim();
    else if (task) body.schedule = null;
    out.replaceChildren();
    try { await onSubmit(body); } catch (err) { out.replaceChildren(problem(err)); }
  } },
  field('Name', name),
  field('Schedule', schedule, 'Cron (*/5 * * * *), 6 fields with seconds, @hourly, or @every 30s.'),
  field('Timezone', tz, 'An IANA zone such as Europe/Paris.'),
  field('Action', type), webhook, publish,
  h('div', { class: 'row3' }, field('Overlap', overlap), field('Attempts', attempts), field('Timeout (s)', timeout)),
  h('div', { class: 'field check' }, active, h('label', { for: active.id || (active.id = `active-${Math.random().toString(36).slice(2)}`) }, 'Active (runs on its schedule)')),
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, submitLabel),
    onCancel && h('button', { type: 'button', onclick: onCancel }, 'Cancel')),
  out);
  return { form, focus: () => name.focus() };
}

function signingSecret(task) {
  const overlap = task.previous_secret_expires_at
    ? ` Until ${when(task.previous_secret_expires_at)} calls are signed with the old secret too, so your endpoint verifies with either while you switch it over.` : '';
  return secretPanel(`Signing secret of “${task.name}”`, task.signing_secret,
    `Shown once: store it now. Your endpoint verifies each call with it (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature).${overlap}`, 'secret');
}

function emptyState(onCreate) {
  if (!onCreate) {
    return h('section', { class: 'card empty', 'aria-labelledby': 'empty-title' },
      h('h2', { id: 'empty-title' }, 'No tasks in this project yet'),
      h('p', {}, 'A developer of the project creates them; their runs show up here live.'));
  }
  return h('section', { class: 'card empty', 'aria-labelledby': 'empty-title' },
    h('h2', { id: 'empty-title' }, 'No tasks yet'),
    h('p', {}, 'A task calls a webhook or publishes a realtime event on a cron schedule, or when you run it. Its runs show up here live.'),
    h('ol', {},
      h('li', {}, 'Choose “Create your first task”, give it a name and a schedule such as ', h('code', {}, '*/5 * * * *'), '.'),
      h('li', {}, 'Pick the action: a webhook URL, or an event to publish to you or a room.'),
      h('li', {}, 'Keep the signing secret shown once, then press “Run now” to try it.')),
    h('p', { class: 'muted' }, 'The same from a terminal: ', h('code', {}, 'POST /v1/tasks'), ' — see ', h('a', { href: '/docs' }, 'the API docs'), '.'),
    h('button', { type: 'button', class: 'primary', id: 'create-first', onclick: onCreate }, 'Create your first task'));
}

// tasksView lists the project's tasks; developers and above create, run,
// pause and delete them.
export function tasksView({ main, role }) {
  const dev = atLeast(role, 'developer');
  const formArea = h('div');
  const secretArea = h('div');
  const listArea = h('div', { 'aria-live': 'polite' });
  const msg = h('div', { class: 'result' });
  let tasks = [];
  const newBtn = h('button', { type: 'button', class: 'primary', id: 'new-task', 'aria-expanded': 'false', onclick: () => openForm() }, 'New task');
  main.replaceChildren(
    h('div', { class: 'head' }, h('h1', {}, 'Tasks'), dev ? newBtn : null),
    secretArea, formArea, msg, listArea);

  function openForm() {
    newBtn.setAttribute('aria-expanded', 'true');
    const f = taskForm({
      submitLabel: 'Create task',
      onSubmit: async (body) => {
        const t = await api('POST', '/v1/tasks', body);
        closeForm();
        show(secretArea, signingSecret(t));
        announce(`Task ${t.name} created`);
        await load();
      },
      onCancel: closeForm,
    });
    formArea.replaceChildren(f.form);
    f.focus();
  }
  function closeForm() { newBtn.setAttribute('aria-expanded', 'false'); formArea.replaceChildren(); }

  async function act(fn, label) {
    msg.replaceChildren();
    try { await fn(); if (label) announce(label); await load(); } catch (err) { msg.replaceChildren(problem(err)); }
  }

  function row(t) {
    const last = h('span', { class: 'last', 'data-task-last': t.id }, t.last_run_at ? when(t.last_run_at) : 'never');
    const del = h('button', { type: 'button', class: 'danger', onclick: () => {
      if (del.dataset.confirm) return act(() => api('DELETE', `/v1/tasks/${t.id}`), `Task ${t.name} deleted`);
      del.dataset.confirm = '1';
      del.textContent = 'Confirm delete';
      del.focus();
    } }, 'Delete');
    const acts = dev ? h('td', { 'data-label': 'Actions', class: 'acts' },
      h('button', { type: 'button', onclick: () => act(() => api('POST', `/v1/tasks/${t.id}/runs`), `Run of ${t.name} queued`) }, 'Run now'),
      h('button', { type: 'button', onclick: () => act(() => api('PATCH', `/v1/tasks/${t.id}`, { active: !t.active }), `${t.name} ${t.active ? 'paused' : 'resumed'}`) }, t.active ? 'Pause' : 'Resume'),
      del) : null;
    return h('tr', { 'data-task-id': t.id },
      h('td', { 'data-label': 'Name' }, h('a', { href: `#/tasks/${t.id}` }, t.name)),
      h('td', { 'data-label': 'Schedule' }, t.schedule ? h('code', {}, t.schedule) : h('span', { class: 'muted' }, 'on demand')),
      h('td', { 'data-label': 'State' }, t.active ? badge('active') : badge('paused')),
      h('td', { 'data-label': 'Next run' }, when(t.next_run_at)),
      h('td', { 'data-label': 'Last run' }, last),
      acts);
  }

  async function load() {
    try {
      const res = await api('GET', '/v1/tasks?limit=100');
      tasks = res.items || [];
    } catch (err) {
      listArea.replaceChildren(problem(err));
      return;
    }
    if (!tasks.length) {
      listArea.replaceChildren(emptyState(dev && openForm));
      return;
    }
    listArea.replaceChildren(h('table', { class: 'list' },
      h('caption', { class: 'sr-only' }, 'The project’s tasks'),
      h('thead', {}, h('tr', {}, ['Name', 'Schedule', 'State', 'Next run', 'Last run', dev ? 'Actions' : null].filter(Boolean).map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, tasks.map(row))));
  }

  load();
  return {
    nav: 'tasks',
    refresh: load,
    onRun(run) {
      const cell = listArea.querySelector(`[data-task-last="${run.task_id}"]`);
      if (cell) cell.replaceChildren(badge(run.status), ' ', when(run.finished_at || run.started_at || run.created_at));
    },
  };
}

// progress orders the states one run goes through: a later attempt, then
// queued, running, finished.
function progress(run) {
  return (run.attempt || 0) * 3 + ({ queued: 0, running: 1 }[run.status] ?? 2);
}

function duration(ms) { return ms === null || ms === undefined ? '—' : `${ms} ms`; }

// taskView is one task: its settings, run it, and its runs, live;
// viewers see it all and change nothing.
export function taskView({ main, caps, role }, id) {
  const dev = atLeast(role, 'developer');
  const head = h('div', { class: 'head' }, h('h1', {}, 'Task'));
  const msg = h('div', { class: 'result' });
  const summary = h('div');
  const editArea = h('div');
  const runsBody = h('tbody');
  const runsArea = h('section', { class: 'card', 'aria-labelledby': 'runs-title' },
    h('h2', { id: 'runs-title' }, 'Runs'),
    h('table', { class: 'list runs' },
      h('thead', {}, h('tr', {}, ['Status', 'Trigger', 'Scheduled for', 'Started', 'Duration', 'HTTP', 'Attempt', 'Result', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
      runsBody),
    h('p', { class: 'muted empty-runs' }, dev ? 'No runs yet: press “Run now”. Runs appear here as they happen.' : 'No runs yet. Runs appear here as they happen.'));
  let task = null;
  main.replaceChildren(h('p', {}, h('a', { href: '#/tasks' }, '← All tasks')), head, msg, summary, editArea, runsArea);

  const act = async (fn, label) => {
    msg.replaceChildren();
    try { const r = await fn(); if (label) announce(label); return r; } catch (err) { msg.replaceChildren(problem(err)); return null; }
  };

  function triggerForm() {
    const payload = h('textarea', { name: 'payload', rows: 3, placeholder: '{"order": 42}', spellcheck: 'false' });
    const runAt = h('input', { name: 'run_at', type: 'datetime-local', step: 1 });
    const fields = [];
    if (caps.triggerPayload) fields.push(field('Payload (JSON, optional)', payload, 'This run’s webhook body or event payload instead of the task’s.'));
    if (caps.triggerRunAt) fields.push(field('Run at (optional)', runAt, 'Delay the run; empty runs it now.'));
    return h('form', { class: 'trigger', onsubmit: async (e) => {
      e.preventDefault();
      let body;
      if (caps.triggerPayload || caps.triggerRunAt) {
        body = {};
        if (payload.value.trim()) {
          try { body.payload = JSON.parse(payload.value); } catch (err) {
            msg.replaceChildren(problem({ detail: `The payload is not valid JSON: ${err.message}` }));
            payload.focus();
            return;
          }
        }
        if (runAt.value) body.run_at = new Date(runAt.value).toISOString();
      }
      const run = await act(() => api('POST', `/v1/tasks/${id}/runs`, body), 'Run queued');
      // Its events may have arrived first: they are newer than this answer.
      if (run) upsert(run, { ifAbsent: true });
    } }, fields, h('button', { type: 'submit', class: 'primary', id: 'run-now' }, 'Run now'));
  }

  function renderTask() {
    head.replaceChildren(h('h1', {}, task.name), task.active ? badge('active') : badge('paused'));
    const a = task.action || {};
    const del = h('button', { type: 'button', class: 'danger', onclick: async () => {
      if (!del.dataset.confirm) { del.dataset.confirm = '1'; del.textContent = 'Confirm delete'; return; }
      msg.replaceChildren();
      try { await api('DELETE', `/v1/tasks/${id}`); announce('Task deleted'); location.hash = '#/tasks'; } catch (err) { msg.replaceChildren(problem(err)); }
    } }, 'Delete');
    summary.replaceChildren(h('section', { class: 'card' },
      h('dl', { class: 'facts' },
        h('dt', {}, 'Schedule'), h('dd', {}, task.schedule ? h('code', {}, task.schedule) : 'on demand', ` (${task.timezone})`),
        h('dt', {}, 'Action'), h('dd', {}, a.type === 'webhook' ? `${a.method || 'POST'} ${a.url}` : `publish ${a.event}${a.room ? ` to room ${a.room}` : ' to you'}`),
        h('dt', {}, 'Next run'), h('dd', {}, when(task.next_run_at)),
        h('dt', {}, 'Retries'), h('dd', {}, `${task.max_attempts} attempts, ${task.timeout_seconds} s each, overlap ${task.overlap}`),
        h('dt', {}, 'Runs'), h('dd', {}, `${task.run_count} (${task.skipped_ticks} ticks skipped)`),
        task.previous_secret_expires_at && h('dt', {}, 'Old secret'),
        task.previous_secret_expires_at && h('dd', { class: 'old-secret' }, `still signs until ${when(task.previous_secret_expires_at)}`)),
      dev ? triggerForm() : null,
      dev && h('div', { class: 'actions' },
        h('button', { type: 'button', onclick: async () => {
          const t = await act(() => api('PATCH', `/v1/tasks/${id}`, { active: !task.active }), task.active ? 'Paused' : 'Resumed');
          if (t) { task = t; renderTask(); }
        } }, task.active ? 'Pause' : 'Resume'),
        h('button', { type: 'button', id: 'edit-task', onclick: openEdit }, 'Edit'),
        a.type === 'webhook' && rotate(),
        del)));
  }

  // rotate is the two-step "Rotate secret" button: the new secret is shown
  // once; the old one keeps signing beside it for 24 h.
  function rotate() {
    const b = h('button', { type: 'button', onclick: async () => {
      if (!b.dataset.confirm) { b.dataset.confirm = '1'; b.textContent = 'Confirm rotate (old secret kept 24 h)'; return; }
      const t = await act(() => api('POST', `/v1/tasks/${id}/rotate-secret`), 'Signing secret rotated');
      if (t) { task = { ...t, signing_secret: undefined }; renderTask(); editArea.replaceChildren(signingSecret(t)); }
    } }, 'Rotate secret');
    return b;
  }

  function openEdit() {
    const f = taskForm({
      task, submitLabel: 'Save changes',
      onSubmit: async (body) => { task = await api('PATCH', `/v1/tasks/${id}`, body); editArea.replaceChildren(); renderTask(); announce('Saved'); },
      onCancel: () => editArea.replaceChildren(),
    });
    editArea.replaceChildren(f.form);
    f.focus();
  }

  function runActions(run) {
    const acts = [];
    if (dev && caps.cancel && (run.status === 'queued' || run.status === 'running')) {
      acts.push(h('button', { type: 'button', class: 'cancel', onclick: async () => { const r = await act(() => api('POST', `/v1/runs/${run.id}/cancel`), 'Run cancelled'); if (r) upsert(r); } }, 'Cancel'));
    }
    if (dev && caps.retry && (run.status === 'failed' || run.status === 'cancelled')) {
      acts.push(h('button', { type: 'button', class: 'retry', onclick: async () => { const r = await act(() => api('POST', `/v1/runs/${run.id}/retry`), 'Retry queued'); if (r) upsert(r, { ifAbsent: true }); } }, 'Retry'));
    }
    if (caps.attempts && run.attempt > 0) {
      const btn = h('button', { type: 'button', class: 'attempts', 'aria-expanded': 'false', onclick: () => toggleAttempts(run, btn) }, 'Attempts');
      acts.push(btn);
    }
    return acts;
  }

  async function toggleAttempts(run, btn) {
    const tr = runsBody.querySelector(`[data-run-id="${run.id}"]`);
    const open = tr.nextElementSibling?.classList.contains('attempts');
    if (open) { tr.nextElementSibling.remove(); btn.setAttribute('aria-expanded', 'false'); return; }
    const res = await act(() => api('GET', `/v1/runs/${run.id}/attempts`));
    if (!res) return;
    btn.setAttribute('aria-expanded', 'true');
    tr.after(h('tr', { class: 'attempts' }, h('td', { colspan: 9 },
      h('ol', {}, (res.items || []).map((x) => h('li', {},
        badge(x.status), ` #${x.attempt} ${when(x.started_at)} · ${duration(x.duration_ms)}`,
        x.http_status ? ` · HTTP ${x.http_status}` : '', x.error ? ` · ${x.error}` : '',
        x.response_excerpt ? h('pre', { class: 'excerpt' }, x.response_excerpt) : ''))))));
  }

  function runRow(run) {
    const result = run.error
      ? h('span', { class: 'err' }, run.error)
      : run.response_excerpt ? h('pre', { class: 'excerpt' }, run.response_excerpt) : '—';
    const tr = h('tr', { 'data-run-id': run.id, 'data-status': run.status },
      h('td', { 'data-label': 'Status' }, badge(run.status)),
      h('td', { 'data-label': 'Trigger' }, run.trigger),
      h('td', { 'data-label': 'Scheduled for' }, when(run.scheduled_for)),
      h('td', { 'data-label': 'Started' }, when(run.started_at)),
      h('td', { 'data-label': 'Duration' }, duration(run.duration_ms)),
      h('td', { 'data-label': 'HTTP' }, run.http_status ?? '—'),
      h('td', { 'data-label': 'Attempt' }, run.attempt || '—'),
      h('td', { 'data-label': 'Result', class: 'res' }, result),
      h('td', { 'data-label': 'Actions', class: 'acts' }, runActions(run)));
    tr.run = run;
    return tr;
  }

  // merge shows a fetched page of runs without undoing what arrived live
  // while it was on its way: a row further along than the fetched run
  // stays, and runs newer than the page stay on top.
  function merge(items) {
    const rows = [...runsBody.querySelectorAll('tr[data-run-id]')];
    const byID = new Map(rows.map((tr) => [tr.dataset.runId, tr]));
    const newest = items.length ? items[0].created_at : '';
    const fetched = new Set(items.map((r) => r.id));
    const fresh = rows.filter((tr) => !fetched.has(tr.dataset.runId) && tr.run.created_at > newest);
    const listed = items.map((r) => {
      const old = byID.get(r.id);
      return old && progress(old.run) > progress(r) ? old : runRow(r);
    });
    runsBody.replaceChildren(...fresh, ...listed);
    runsArea.querySelector('.empty-runs').hidden = runsBody.childElementCount > 0;
  }

  function upsert(run, { ifAbsent = false } = {}) {
    if (run.task_id !== id) return;
    const old = runsBody.querySelector(`[data-run-id="${run.id}"]`);
    if (old && ifAbsent) return;
    const tr = runRow(run);
    if (old) {
      if (old.nextElementSibling?.classList.contains('attempts')) old.nextElementSibling.remove();
      old.replaceWith(tr);
    } else runsBody.prepend(tr);
    runsArea.querySelector('.empty-runs').hidden = true;
  }

  const table = runsArea.querySelector('table');
  async function load() {
    table.setAttribute('aria-busy', 'true');
    try {
      task = await api('GET', `/v1/tasks/${id}`);
      renderTask();
      const res = await api('GET', `/v1/tasks/${id}/runs?limit=50`);
      merge(res.items || []);
    } catch (err) {
      msg.replaceChildren(problem(err));
    }
    table.setAttribute('aria-busy', 'false');
  }

  load();
  return { nav: 'tasks', refresh: load, onRun: (run) => upsert(run) };
}
