import { session, capabilities } from './api.js';
import { connectLive } from './live.js';
import { h, field, problem, announce } from './dom.js';
import { tasksView, taskView, onRunEvent } from './tasks.js';
import { clusterView } from './admin.js';
import { registration, registerPart, forgotView, resetView, accountView } from './account.js';
import { loadProjects, current, choose, projectList, streamOf, atLeast } from './projects.js';
import { membersView, inviteView } from './members.js';
import { keysView } from './keys.js';

const main = document.getElementById('main');
const state = { user: null, caps: {}, live: null, view: null };

function setLive(s) {
  const el = document.getElementById('live');
  el.dataset.state = s;
  el.textContent = { live: 'live', offline: 'reconnecting…', 'signed-out': 'signed out' }[s] || s;
  if (s === 'signed-out') signedOut();
  if (s === 'live' && state.view?.refresh) state.view.refresh();
}

// onFrame takes the chosen project's run events (every project of the
// account streams to the socket) and leaves a project the account was
// taken out of.
function onFrame(f) {
  if (f.event && f.event.startsWith('task.run.') && f.payload && f.stream === streamOf()) {
    onRunEvent(f.event, f.payload, state.view);
  }
  if (f.event === 'project.removed' && f.payload) projectRemoved(f.payload);
}

async function projectRemoved({ project, reason }) {
  const was = current();
  await refreshProjects();
  if (was?.id !== project) return;
  announce(reason === 'deleted' ? `Project ${was.name} was deleted` : `You are no longer a member of ${was.name}`);
  route();
}

// inviteToken is the token of an invite link (#/invite?token=…).
function inviteToken() {
  const m = location.hash.match(/^#\/invite\?token=([A-Za-z0-9_-]+)$/);
  return m ? m[1] : '';
}

// refreshProjects reads the projects again (prefer: choose that one) and
// redraws the switcher and the links the role allows.
async function refreshProjects(prefer) {
  try { await loadProjects(state.user, prefer); } catch { /* the views show the API's error */ }
  const sel = document.getElementById('project');
  sel.replaceChildren(...projectList().map((p) => h('option', { value: p.id }, p.personal ? `${p.name} (personal)` : p.name)));
  sel.value = current()?.id || '';
  document.querySelector('[data-nav=keys]').hidden = !atLeast(current()?.role, 'admin');
}

// connect opens the live socket; a membership added reaches sockets opened
// after it, so joining or creating a project connects again.
function connect() {
  state.live?.close();
  state.live = connectLive({ onFrame, onState: setLive });
}

async function projectsChanged(prefer) {
  await refreshProjects(prefer);
  connect();
}

// resetToken is the token of a reset link the page was opened with.
function resetToken() {
  const m = location.hash.match(/^#\/reset\?token=([A-Za-z0-9_-]+)$/);
  return m ? m[1] : '';
}

async function start() {
  if (resetToken()) {
    resetView(main, resetToken(), (note) => { location.hash = '#/signin'; signInView(note); });
    return;
  }
  try {
    const s = await session.current();
    await signedIn(s.user);
  } catch {
    signInView();
  }
}

async function signedIn(user) {
  state.user = user;
  try { state.caps = await capabilities(); } catch { state.caps = {}; }
  document.getElementById('nav').hidden = false;
  document.getElementById('who').hidden = false;
  document.getElementById('email').textContent = user.email;
  document.querySelector('[data-nav=cluster]').hidden = user.role !== 'admin';
  await refreshProjects();
  connect();
  if (!location.hash || location.hash === '#/signin') location.hash = '#/tasks';
  route();
}

function signedOut(note) {
  state.live?.close();
  state.live = null;
  state.user = null;
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  signInView(typeof note === 'string' ? note : '');
}

function route() {
  if (!state.user) return;
  state.view?.stop?.();
  const hash = location.hash || '#/tasks';
  const ctx = { main, caps: state.caps, user: state.user, project: current(), role: current()?.role || 'viewer', projectsChanged };
  let m;
  if (inviteToken()) state.view = inviteView(ctx, inviteToken());
  else if ((m = hash.match(/^#\/tasks\/([0-9a-f-]+)$/))) state.view = taskView(ctx, m[1]);
  else if (hash === '#/members') state.view = membersView(ctx);
  else if (hash === '#/keys') state.view = keysView(ctx);
  else if (hash === '#/cluster' && state.user.role === 'admin') state.view = clusterView(ctx);
  else if (hash === '#/account') state.view = accountView(ctx, (note) => { location.hash = '#/signin'; signedOut(note); });
  else state.view = tasksView(ctx);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === state.view.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.focus({ preventScroll: true });
}

async function signInView(note = '') {
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true, minlength: 8 });
  const out = h('div', { class: 'result' });
  const submit = async (mode, invite) => {
    out.replaceChildren();
    try {
      const s = mode === 'register'
        ? await session.register(email.value, password.value, invite)
        : await session.signIn(email.value, password.value);
      // A registration with an invite accepted it already.
      if (mode === 'register' && invite && inviteToken()) location.hash = '#/tasks';
      announce(`Signed in as ${s.user.email}`);
      await signedIn(s.user);
    } catch (err) {
      out.replaceChildren(problem(err));
    }
  };
  // The sign-in form follows the server's registration policy: no
  // "Create account" where registration is closed, an invite field where
  // it needs one.
  const policy = await registration();
  let form;
  const reg = registerPart(policy, (invite) => { if (form.reportValidity()) submit('register', invite); }, inviteToken());
  if (inviteToken() && !note) note = 'Sign in, or create an account with the invited address, to accept the invite.';
  form = h('form', { class: 'card narrow', 'aria-labelledby': 'signin-title', 'data-registration': policy, onsubmit: (e) => { e.preventDefault(); submit('signin'); } },
    h('h1', { id: 'signin-title' }, 'Sign in to Switchboard'),
    note ? h('p', { class: 'ok', role: 'status' }, note) : null,
    h('p', { class: 'muted', id: 'registration-note' }, reg.note || 'Use your Switchboard account, or create one with your invite.'),
    field('Email', email),
    field('Password', password, 'At least 8 characters.'),
    reg.fields,
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', id: 'signin' }, 'Sign in'),
      reg.actions,
      h('button', { type: 'button', class: 'link', id: 'forgot', onclick: () => forgotView(main, () => signInView()) }, 'Forgot password?')),
    out);
  main.replaceChildren(form);
  email.focus();
}

document.getElementById('project').addEventListener('change', (e) => {
  const p = projectList().find((x) => x.id === e.target.value);
  choose(p);
  document.querySelector('[data-nav=keys]').hidden = !atLeast(p?.role, 'admin');
  announce(`Project ${p?.name}`);
  route();
});
document.getElementById('signout').addEventListener('click', async () => {
  try { await session.signOut(); } catch { /* the cookie may be gone already */ }
  location.hash = '#/signin';
  signedOut();
});
window.addEventListener('hashchange', () => {
  if (resetToken()) { start(); return; }
  route();
});
start();
