// Waiting on events with a deadline (never a bare sleep).

/** Resolves with the detail of the next `type` event of client that satisfies pred. */
export function nextEvent(client, type, pred = () => true, timeoutMs = 10_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { off(); reject(new Error(`no ${type} event within ${timeoutMs} ms`)); }, timeoutMs);
    const off = client.on(type, (detail) => {
      if (!pred(detail)) return;
      clearTimeout(timer);
      off();
      resolve(detail);
    });
  });
}

/** Collects every `type` event of client into an array. */
export function collect(client, type) {
  const out = [];
  client.on(type, (d) => out.push(d));
  return out;
}

/** Resolves once check() is true, re-checked on every `type` event of client. */
export function until(client, type, check, timeoutMs = 10_000) {
  if (check()) return Promise.resolve();
  return nextEvent(client, type, () => check(), timeoutMs).then(() => {});
}
