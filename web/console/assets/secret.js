import { h } from './dom.js';

// secretPanel shows a secret the server answers once (a signing secret,
// an API key, an invite link) with a copy button; id names the panel.
export function secretPanel(title, secret, explanation, id) {
  const code = h('code', { class: 'secret', tabindex: 0 }, secret);
  const copy = h('button', { type: 'button', class: 'copy', onclick: async () => {
    try { await navigator.clipboard.writeText(secret); copy.textContent = 'Copied'; }
    catch { getSelection().selectAllChildren(code); copy.textContent = 'Selected: press Ctrl+C'; }
  } }, 'Copy');
  return h('section', { class: 'card notice', id, role: 'status', 'aria-labelledby': `${id}-title` },
    h('h2', { id: `${id}-title` }, title),
    h('p', {}, explanation),
    h('div', { class: 'secret-row' }, code, copy));
}
