import { api } from './api.js';
import { h, field, problem, announce, when } from './dom.js';
import { atLeast } from './projects.js';
import { secretPanel } from './secret.js';

// keysView is the project's API keys, for its admins: create one with
// scopes (its secret is shown once, in the answer), list them by prefix,
// revoke.
export function keysView({ main, role, user, project }) {
  if (!atLeast(role, 'admin')) {
    main.replaceChildren(h('h1', {}, 'API keys'),
      h('p', { class: 'muted', id: 'keys-need-admin' }, `API keys of ${project?.name ?? 'this project'} are managed by its admins; your role is ${role}.`));
    return { nav: 'keys' };
  }
  const msg = h('div', { class: 'result', role: 'status' });
  const secretArea = h('div');
  const body = h('tbody');
  const empty = h('p', { class: 'muted', hidden: true }, 'No API keys yet.');
  main.replaceChildren(h('div', { class: 'head' }, h('h1', {}, `API keys of ${project?.name ?? 'this project'}`)),
    secretArea, msg, createForm(),
    h('section', { class: 'card', 'aria-labelledby': 'keys-title' }, h('h2', { id: 'keys-title' }, 'Keys'),
      h('table', { class: 'list keys' },
        h('thead', {}, h('tr', {}, ['Name', 'Prefix', 'Scopes', 'Last used', 'Expires', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
        body), empty));

  function createForm() {
    const name = h('input', { name: 'key-name', required: true, maxlength: 100, autocomplete: 'off' });
    const expires = h('input', { name: 'key-expires', type: 'datetime-local', step: 1 });
    const scopes = ['read', 'write', ...(user.role === 'admin' ? ['admin'] : [])].map((s) =>
      h('input', { type: 'checkbox', name: 'scope', value: s, id: `scope-${s}`, checked: s !== 'admin' }));
    const out = h('div', { class: 'result' });
    return h('form', { class: 'card form', id: 'key-form', 'aria-labelledby': 'new-key-title', onsubmit: async (e) => {
      e.preventDefault();
      out.replaceChildren();
      const req = { name: name.value, scopes: scopes.filter((c) => c.checked).map((c) => c.value) };
      if (expires.value) req.expires_at = new Date(expires.value).toISOString();
      try {
        const k = await api('POST', '/v1/api-keys', req);
        secretArea.replaceChildren(secretPanel(`API key “${k.name}”`, k.secret,
          'Shown once: store it now. Send it as Authorization: Bearer … ; only its prefix is kept to recognise it.', 'key-secret'));
        name.value = expires.value = '';
        announce(`Key ${k.name} created`);
        await load();
      } catch (err) { out.replaceChildren(problem(err)); }
    } }, h('h2', { id: 'new-key-title' }, 'New API key'),
    h('div', { class: 'grid2' }, field('Name', name), field('Expires (optional)', expires, 'Empty: never expires.')),
    h('fieldset', { class: 'group' }, h('legend', {}, 'Scopes'),
      scopes.map((c) => h('div', { class: 'field check' }, c, h('label', { for: c.id }, { read: 'read: GET routes', write: 'write: every route (includes read)', admin: 'admin: operator routes' }[c.value])))),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'create-key' }, 'Create key')), out);
  }

  function row(k) {
    const revoke = h('button', { type: 'button', class: 'danger', 'aria-label': `Revoke ${k.name}`, onclick: async () => {
      if (!revoke.dataset.confirm) { revoke.dataset.confirm = '1'; revoke.textContent = 'Confirm revoke'; return; }
      msg.replaceChildren();
      try { await api('DELETE', `/v1/api-keys/${k.id}`); announce(`Key ${k.name} revoked`); await load(); } catch (err) { msg.replaceChildren(problem(err)); }
    } }, 'Revoke');
    return h('tr', { 'data-key-id': k.id },
      h('td', { 'data-label': 'Name' }, k.name),
      h('td', { 'data-label': 'Prefix' }, h('code', { class: 'prefix' }, `${k.prefix}…`)),
      h('td', { 'data-label': 'Scopes' }, k.scopes.join(', ')),
      h('td', { 'data-label': 'Last used' }, k.last_used_at ? when(k.last_used_at) : 'never'),
      h('td', { 'data-label': 'Expires' }, k.expires_at ? when(k.expires_at) : 'never'),
      h('td', { 'data-label': 'Actions', class: 'acts' }, revoke));
  }

  async function load() {
    try {
      const res = await api('GET', '/v1/api-keys');
      body.replaceChildren(...(res.items || []).map(row));
      empty.hidden = body.childElementCount > 0;
    } catch (err) { msg.replaceChildren(problem(err)); }
  }

  load();
  return { nav: 'keys', refresh: load };
}
