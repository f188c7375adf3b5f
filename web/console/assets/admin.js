import { api } from './api.js';
import { h, field, problem, ago, when } from './dom.js';

const yes = (v, good, bad) => h('span', { class: `badge ${v ? 's-succeeded' : 's-failed'}` }, v ? good : bad);

// clusterView is the operators' page: nodes, backlog, drain, disconnect,
// presence. It polls GET /v1/cluster/status every 2 s while open (the
// status is gathered from every node on each call).
export function clusterView({ main }) {
  const msg = h('div', { class: 'result', role: 'status' });
  const nodesBody = h('tbody');
  const degraded = h('p', { class: 'warn', hidden: true, role: 'alert' });
  const backlog = h('dl', { class: 'facts' });
  const updated = h('p', { class: 'muted small' });
  const nodes = h('section', { class: 'card', 'aria-labelledby': 'nodes-title' },
    h('h2', { id: 'nodes-title' }, 'Nodes'), degraded,
    h('table', { class: 'list nodes' },
      h('thead', {}, h('tr', {}, ['Node', 'Address', 'Roles', 'Reachable', 'Draining', 'Heartbeat', 'Sockets', 'Jobs running', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
      nodesBody), updated);

  const email = h('input', { type: 'email', name: 'disconnect-email', required: true, autocomplete: 'off' });
  const discOut = h('div', { class: 'result', role: 'status' });
  const disconnect = h('form', { class: 'card form', 'aria-labelledby': 'disc-title', onsubmit: async (e) => {
    e.preventDefault();
    discOut.replaceChildren();
    try {
      const found = await api('GET', `/v1/admin/users?email=${encodeURIComponent(email.value)}`);
      const user = (found.items || [])[0];
      if (!user) { discOut.replaceChildren(problem({ detail: `No account has the address ${email.value}.` })); return; }
      const r = await api('POST', `/v1/admin/users/${user.id}/disconnect`);
      discOut.replaceChildren(outcome(`Disconnected ${user.email}: ${r.closed} socket(s) closed.`, r.acked, r.failed));
    } catch (err) { discOut.replaceChildren(problem(err)); }
  } }, h('h2', { id: 'disc-title' }, 'Disconnect a user'),
  h('p', { class: 'muted' }, 'Closes every socket of the account on every node (close code 4001).'),
  field('Email', email), h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Disconnect')), discOut);

  const room = h('input', { name: 'room', required: true, maxlength: 128, autocomplete: 'off' });
  const presOut = h('div', { class: 'result' });
  const presence = h('form', { class: 'card form', 'aria-labelledby': 'pres-title', onsubmit: async (e) => {
    e.preventDefault();
    presOut.replaceChildren();
    try {
      const p = await api('GET', `/v1/presence?room=${encodeURIComponent(room.value)}`);
      presOut.replaceChildren(
        p.users.length ? h('ul', {}, p.users.map((u) => h('li', {}, h('code', {}, u.user_id), ` — ${u.connections} connection(s)`)))
          : h('p', {}, `Nobody is in ${p.room}.`),
        p.degraded ? h('p', { class: 'warn' }, `Some of these members are on nodes that stopped heartbeating (${p.unavailable_nodes.join(', ')}): they leave once the node is judged dead.`)
          : h('p', { class: 'muted' }, 'Every node holding members is live.'));
    } catch (err) { presOut.replaceChildren(problem(err)); }
  } }, h('h2', { id: 'pres-title' }, 'Presence'),
  field('Room', room), h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Show members')), presOut);

  main.replaceChildren(
    h('div', { class: 'head' }, h('h1', {}, 'Cluster'),
      h('nav', { class: 'links', 'aria-label': 'Operator tools' },
        h('a', { href: '/riverui/' }, 'River UI'), h('a', { href: '/docs' }, 'API docs'), h('a', { href: '/metrics' }, 'Metrics'))),
    msg, nodes,
    h('section', { class: 'card', 'aria-labelledby': 'backlog-title' }, h('h2', { id: 'backlog-title' }, 'Queue and scheduler'), backlog),
    h('div', { class: 'grid2' }, disconnect, presence));

  function outcome(text, acked, failed) {
    return h('div', { class: 'outcome' }, h('p', {}, text),
      h('p', {}, 'Acked: ', acked.length ? acked.map((id) => h('code', { class: 'acked' }, id.slice(0, 8))) : 'none'),
      failed.length ? h('p', { class: 'warn' }, 'Failed: ', failed.map((id) => h('code', { class: 'failed' }, id.slice(0, 8)))) : h('p', { class: 'muted' }, 'No node failed.'));
  }

  async function drain(n) {
    msg.replaceChildren();
    try {
      const r = await api('POST', `/v1/admin/nodes/${n.id}/drain`);
      msg.replaceChildren(h('div', { class: 'outcome', 'data-drained': n.id },
        h('p', {}, `Drain of ${n.name || n.addr}: `, r.acked ? h('strong', { class: 'acked' }, `acked by ${n.id.slice(0, 8)}`) : 'not acked'),
        h('p', { class: 'muted' }, 'It takes no new jobs or sockets and fails readiness; it keeps running.')));
      refresh();
    } catch (err) { msg.replaceChildren(problem(err)); }
  }

  function nodeRow(n) {
    return h('tr', { 'data-node-id': n.id, 'data-reachable': String(n.reachable), 'data-draining': String(n.draining) },
      h('td', { 'data-label': 'Node' }, h('span', {}, h('code', { title: n.id }, n.id.slice(0, 8)), n.name ? ` ${n.name}` : '')),
      h('td', { 'data-label': 'Address' }, n.addr),
      h('td', { 'data-label': 'Roles' }, (n.roles || []).join(', ')),
      h('td', { 'data-label': 'Reachable' }, yes(n.reachable, 'reachable', 'unreachable')),
      h('td', { 'data-label': 'Draining' }, n.draining ? h('span', { class: 'badge s-queued' }, 'draining') : 'no'),
      h('td', { 'data-label': 'Heartbeat' }, `${ago(n.heartbeat_age_ms)} ago`),
      h('td', { 'data-label': 'Sockets' }, n.reachable ? n.ws_connections : '—'),
      h('td', { 'data-label': 'Jobs running' }, n.reachable ? n.jobs_running : '—'),
      h('td', { 'data-label': 'Actions', class: 'acts' },
        h('button', { type: 'button', class: 'drain', disabled: n.draining || !n.reachable, 'aria-label': `Drain node ${n.id.slice(0, 8)}`, onclick: () => drain(n) }, 'Drain')));
  }

  // What a worker autoscaler reads (docs/deploy.md): demand counts running
  // jobs too, so a busy pool never reads zero between bursts.
  function backlogSignals(b) {
    if (!b) return [];
    return [
      h('dt', {}, 'Worker demand'), h('dd', { 'data-signal': 'demand' }, b.demand ?? 0),
      h('dt', {}, 'Oldest available job'), h('dd', { 'data-signal': 'oldest-available' }, b.available_jobs ? `${ago(b.oldest_available_age_ms)} ago` : '—'),
      h('dt', {}, 'NOTIFY queue used'), h('dd', { 'data-signal': 'notify-queue' }, `${((b.notification_queue_usage ?? 0) * 100).toFixed(1)} %`),
    ];
  }

  let timer = null;
  let stopped = false;
  async function refresh() {
    clearTimeout(timer);
    try {
      const st = await api('GET', '/v1/cluster/status');
      nodesBody.replaceChildren(...st.nodes.map(nodeRow));
      degraded.hidden = !st.degraded;
      degraded.textContent = 'Degraded: some nodes did not answer; their numbers are missing.';
      const q = st.queue || {};
      const sch = st.scheduler || {};
      backlog.replaceChildren(
        ...['available', 'running', 'scheduled', 'retryable', 'discarded'].flatMap((k) => [h('dt', {}, `Jobs ${k}`), h('dd', {}, q[k] ?? 0)]),
        h('dt', {}, 'Tasks due'), h('dd', {}, sch.due_tasks ?? 0),
        h('dt', {}, 'Oldest due'), h('dd', {}, sch.due_tasks ? `${ago(sch.oldest_due_age_ms)} ago` : '—'),
        ...backlogSignals(st.backlog));
      updated.textContent = `Updated ${when(new Date().toISOString())}; refreshes every 2 s.`;
    } catch (err) {
      msg.replaceChildren(problem(err));
    }
    if (!stopped) timer = setTimeout(refresh, 2000);
  }
  refresh();
  return { nav: 'cluster', refresh, stop() { stopped = true; clearTimeout(timer); } };
}
