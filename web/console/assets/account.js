import { api, publicAPI, session } from './api.js';
import { h, field, problem, announce } from './dom.js';

// The pages about an account's password and sessions: the sign-in page's
// registration part (it follows the server's registration policy), a
// forgotten password, the reset link's page, and the account page.

// registration reads who may register here: 'open', 'invite' or 'closed'
// ('closed' when the server cannot be asked: offer nothing it may refuse).
export async function registration() {
  try {
    return (await publicAPI('GET', '/v1/auth/registration')).registration;
  } catch {
    return 'closed';
  }
}

// registerPart is what the sign-in form shows about creating an account
// under the policy: a button when open, an invite field and a button when
// invite, a sentence when closed. invite is the token of the invite link
// the page was opened with, if any.
export function registerPart(policy, onRegister, invite = '') {
  if (policy === 'closed') {
    return { fields: [], actions: [], note: 'Registration is closed on this server: an operator creates accounts.' };
  }
  const token = h('input', { name: 'invite', autocomplete: 'off', required: true, maxlength: 200, value: invite });
  const button = h('button', { type: 'button', id: 'register', onclick: () => onRegister(policy === 'invite' ? token.value.trim() : '') },
    policy === 'invite' ? 'Create account with invite' : 'Create account');
  if (policy === 'invite') {
    return { fields: [field('Invite token', token, 'Registration needs an invite here: paste the token you were given.')], actions: [button], note: '' };
  }
  return { fields: [], actions: [button], note: 'New accounts are users; an operator grants admin.' };
}

// forgotView asks for a reset link by mail. The answer is the same whether
// or not an account has the address.
export function forgotView(main, back) {
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true });
  const out = h('div', { class: 'result', role: 'status' });
  const form = h('form', { class: 'card narrow', 'aria-labelledby': 'forgot-title', onsubmit: async (e) => {
    e.preventDefault();
    out.replaceChildren();
    try {
      const r = await publicAPI('POST', '/v1/auth/forgot', { email: email.value });
      out.replaceChildren(h('p', { class: 'ok' }, `${r.message[0].toUpperCase()}${r.message.slice(1)}. No mail? Ask an operator for a reset link.`));
    } catch (err) { out.replaceChildren(problem(err)); }
  } },
  h('h1', { id: 'forgot-title' }, 'Forgot your password?'),
  h('p', { class: 'muted' }, 'We mail a link that lets you choose a new one, valid for one hour.'),
  field('Email', email),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Mail me a link'),
    h('button', { type: 'button', class: 'link', onclick: back }, 'Back to sign in')),
  out);
  main.replaceChildren(form);
  email.focus();
}

// resetView sets a new password with the token of a reset link
// (#/reset?token=…).
export function resetView(main, token, done) {
  const password = h('input', { type: 'password', name: 'new-password', autocomplete: 'new-password', required: true, minlength: 8 });
  const out = h('div', { class: 'result', role: 'status' });
  const form = h('form', { class: 'card narrow', 'aria-labelledby': 'reset-title', onsubmit: async (e) => {
    e.preventDefault();
    out.replaceChildren();
    try {
      await publicAPI('POST', '/v1/auth/reset', { token, password: password.value });
      announce('Password changed');
      done('Your password is changed and every session of the account is signed out. Sign in with the new password.');
    } catch (err) { out.replaceChildren(problem(err)); }
  } },
  h('h1', { id: 'reset-title' }, 'Choose a new password'),
  field('New password', password, 'At least 8 characters. Every session of the account is signed out.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'reset' }, 'Set password')),
  out);
  main.replaceChildren(form);
  password.focus();
}

// accountView changes the password (then signs in again with it: the
// change ends this session too) and signs out everywhere.
export function accountView({ main, user }, signedOut) {
  const current = h('input', { type: 'password', name: 'current-password', autocomplete: 'current-password', required: true });
  const next = h('input', { type: 'password', name: 'new-password', autocomplete: 'new-password', required: true, minlength: 8 });
  const out = h('div', { class: 'result', role: 'status' });
  const change = h('form', { class: 'card form', 'aria-labelledby': 'password-title', onsubmit: async (e) => {
    e.preventDefault();
    out.replaceChildren();
    try {
      await api('POST', '/v1/me/password', { current_password: current.value, new_password: next.value });
      await session.signIn(user.email, next.value);
      current.value = next.value = '';
      announce('Password changed');
      out.replaceChildren(h('p', { class: 'ok' }, 'Password changed. Every other session of this account is signed out.'));
    } catch (err) { out.replaceChildren(problem(err)); }
  } },
  h('h2', { id: 'password-title' }, 'Change password'),
  field('Current password', current), field('New password', next, 'At least 8 characters.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'change-password' }, 'Change password')), out);

  const endOut = h('div', { class: 'result', role: 'status' });
  const everywhere = h('section', { class: 'card', 'aria-labelledby': 'sessions-title' },
    h('h2', { id: 'sessions-title' }, 'Sessions'),
    h('p', { class: 'muted' }, 'Signs out every browser and token of this account, this one included. API keys stay valid.'),
    h('div', { class: 'actions' }, h('button', { type: 'button', id: 'signout-everywhere', onclick: async () => {
      try {
        await api('POST', '/v1/me/sessions/revoke');
        signedOut('Every session of the account is signed out.');
      } catch (err) { endOut.replaceChildren(problem(err)); }
    } }, 'Sign out everywhere')), endOut);

  main.replaceChildren(h('h1', {}, 'Account'), h('p', { class: 'muted' }, user.email), change, everywhere);
  return { nav: 'account' };
}
