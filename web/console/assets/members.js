import { api } from './api.js';
import { h, field, problem, announce, when } from './dom.js';
import { ROLES, atLeast } from './projects.js';
import { secretPanel } from './secret.js';

// The project's people: members with their roles, invites, and a new
// project. Admins change roles, remove members and invite; the owner role
// is given only by an owner. Everyone else sees the lists.

function roleSelect(name, role, callerRole, label) {
  const choices = ROLES.filter((r) => r !== 'owner' || callerRole === 'owner');
  const sel = h('select', { name, 'aria-label': label }, choices.map((r) => h('option', { value: r }, r)));
  sel.value = role;
  return sel;
}

export function membersView({ main, project, role, user, projectsChanged }) {
  const msg = h('div', { class: 'result', role: 'status' });
  const membersBody = h('tbody');
  const invitesArea = h('div');
  const linkArea = h('div');
  const admin = atLeast(role, 'admin');
  main.replaceChildren(
    h('div', { class: 'head' }, h('h1', {}, `Members of ${project?.name ?? 'this project'}`), h('span', { class: 'badge role', id: 'my-role' }, `you: ${role}`)),
    msg, linkArea,
    h('section', { class: 'card', 'aria-labelledby': 'members-title' }, h('h2', { id: 'members-title' }, 'Members'),
      h('table', { class: 'list members' },
        h('thead', {}, h('tr', {}, ['Email', 'Role', 'Added', admin ? 'Actions' : null].filter(Boolean).map((c) => h('th', { scope: 'col' }, c)))),
        membersBody)),
    admin ? inviteForm() : null, invitesArea, newProjectForm(projectsChanged));

  const act = async (fn, label) => {
    msg.replaceChildren();
    try { await fn(); announce(label); await load(); } catch (err) { msg.replaceChildren(problem(err)); }
  };
  const base = `/v1/projects/${project?.id}`;

  function memberRow(m) {
    const cells = [
      h('td', { 'data-label': 'Email' }, m.email, m.user_id === user.id ? h('span', { class: 'muted' }, ' (you)') : null),
      h('td', { 'data-label': 'Role' }, admin ? roleCell(m) : m.role),
      h('td', { 'data-label': 'Added' }, when(m.added_at)),
    ];
    if (admin) {
      cells.push(h('td', { 'data-label': 'Actions', class: 'acts' },
        h('button', { type: 'button', class: 'danger remove', 'aria-label': `Remove ${m.email}`,
          onclick: () => act(() => api('DELETE', `${base}/members/${m.user_id}`), `${m.email} removed`) }, 'Remove')));
    }
    return h('tr', { 'data-member': m.email, 'data-role': m.role }, cells);
  }

  function roleCell(m) {
    const sel = roleSelect('role', m.role, role, `Role of ${m.email}`);
    sel.addEventListener('change', () => act(() => api('PATCH', `${base}/members/${m.user_id}`, { role: sel.value }), `${m.email} is now ${sel.value}`));
    return sel;
  }

  function inviteForm() {
    const email = h('input', { type: 'email', name: 'invite-email', required: true, autocomplete: 'off', maxlength: 254 });
    const pick = roleSelect('invite-role', 'developer', role, null);
    const out = h('div', { class: 'result' });
    return h('form', { class: 'card form', id: 'invite-form', 'aria-labelledby': 'invite-title', onsubmit: async (e) => {
      e.preventDefault();
      out.replaceChildren();
      try {
        const inv = await api('POST', `${base}/invites`, { email: email.value, role: pick.value });
        const link = `${location.origin}/console/#/invite?token=${inv.token}`;
        linkArea.replaceChildren(secretPanel(`Invite for ${inv.email} (${inv.role})`, link,
          'Shown once: send this link to them. It works once, for 7 days, for an account with that address.', 'invite-link'));
        email.value = '';
        announce(`Invite for ${inv.email} created`);
        await load();
      } catch (err) { out.replaceChildren(problem(err)); }
    } }, h('h2', { id: 'invite-title' }, 'Invite someone'),
    h('div', { class: 'grid2' }, field('Email', email), field('Role', pick, 'Viewers read; developers run and edit tasks; admins manage people and keys.')),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'invite' }, 'Invite')), out);
  }

  function invitesCard(items) {
    if (!items.length) return h('p', { class: 'muted' }, 'No pending invites.');
    return h('table', { class: 'list invites' },
      h('thead', {}, h('tr', {}, ['Email', 'Role', 'Expires', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, items.map((i) => h('tr', { 'data-invite': i.email },
        h('td', { 'data-label': 'Email' }, i.email), h('td', { 'data-label': 'Role' }, i.role),
        h('td', { 'data-label': 'Expires' }, when(i.expires_at)),
        h('td', { 'data-label': 'Actions', class: 'acts' }, h('button', { type: 'button', class: 'danger', 'aria-label': `Revoke the invite for ${i.email}`,
          onclick: () => act(() => api('DELETE', `${base}/invites/${i.id}`), `Invite for ${i.email} revoked`) }, 'Revoke'))))));
  }

  async function load() {
    try {
      const res = await api('GET', `${base}/members?limit=100`);
      membersBody.replaceChildren(...(res.items || []).map(memberRow));
      if (admin) {
        const inv = await api('GET', `${base}/invites`);
        invitesArea.replaceChildren(h('section', { class: 'card', 'aria-labelledby': 'invites-title' },
          h('h2', { id: 'invites-title' }, 'Pending invites'), invitesCard(inv.items || [])));
      }
    } catch (err) { msg.replaceChildren(problem(err)); }
  }

  load();
  return { nav: 'members', refresh: load };
}

// newProjectForm creates a project (the caller is its owner) and switches to it.
function newProjectForm(projectsChanged) {
  const name = h('input', { name: 'project-name', required: true, maxlength: 100, autocomplete: 'off' });
  const out = h('div', { class: 'result' });
  return h('form', { class: 'card form', 'aria-labelledby': 'new-project-title', onsubmit: async (e) => {
    e.preventDefault();
    out.replaceChildren();
    try {
      const p = await api('POST', '/v1/projects', { name: name.value }, { inProject: false });
      announce(`Project ${p.name} created`);
      await projectsChanged(p.id);
      location.hash = '#/tasks';
    } catch (err) { out.replaceChildren(problem(err)); }
  } }, h('h2', { id: 'new-project-title' }, 'New project'),
  h('p', { class: 'muted' }, 'A project holds tasks, runs, rooms and API keys that its members share. You are its owner.'),
  field('Name', name), h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'create-project' }, 'Create project')), out);
}

// inviteView accepts the invite of a link (#/invite?token=…) with the
// signed-in account, then switches to the project.
export function inviteView({ main, user, projectsChanged }, token) {
  const out = h('div', { class: 'result', role: 'status' });
  const accept = h('button', { type: 'button', class: 'primary', id: 'accept-invite', onclick: async () => {
    out.replaceChildren();
    accept.disabled = true;
    try {
      const r = await api('POST', '/v1/invites/accept', { token }, { inProject: false });
      announce(`You joined ${r.project.name} as ${r.role}`);
      await projectsChanged(r.project.id);
      location.hash = '#/tasks';
    } catch (err) { accept.disabled = false; out.replaceChildren(problem(err)); }
  } }, 'Accept invite');
  main.replaceChildren(h('section', { class: 'card narrow', 'aria-labelledby': 'accept-title' },
    h('h1', { id: 'accept-title' }, 'Join a project'),
    h('p', {}, `You were invited to a project. Accepting adds ${user.email} to it; the invite must be for this address.`),
    h('div', { class: 'actions' }, accept, h('a', { href: '#/tasks' }, 'Not now')), out));
  return { nav: '' };
}
