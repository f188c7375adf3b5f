// h builds an element: h('p', {class: 'x', onclick: fn}, 'text', child).
// Text is always set as text, never parsed as HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let seq = 0;
// field is a labelled control: the label names it for screen readers.
export function field(label, control, hint) {
  const id = control.id || `f${++seq}`;
  control.id = id;
  const hintEl = hint ? h('small', { id: `${id}-hint`, class: 'hint' }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hintEl);
}

export function announce(text) {
  const el = document.getElementById('announce');
  el.textContent = '';
  setTimeout(() => { el.textContent = text; }, 50);
}

export function ago(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60000)} min`;
}

export function when(ts) {
  if (!ts) return '—';
  const d = new Date(ts);
  return d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

// problem shows an API error as a person can act on it: the problem's
// detail and each errors[].message with the field it is about.
export function problem(err) {
  const box = h('div', { class: 'error', role: 'alert' }, h('p', { class: 'detail' }, err.detail || err.message || String(err)));
  const list = (err.errors || []).filter((e) => e && e.message);
  if (list.length) {
    box.append(h('ul', {}, list.map((e) => h('li', {}, e.location ? `${e.location.replace(/^body\./, '')}: ` : '', e.message))));
  }
  return box;
}

// showResult replaces the contents of a result area.
export function show(area, ...nodes) {
  area.replaceChildren(...nodes);
}
