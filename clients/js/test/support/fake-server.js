// An in-process WebSocket server speaking the frames of docs/api.md, driven by the test.
import { WebSocketServer } from 'ws';
import { once } from 'node:events';

/** Resolves when check() returns a value other than undefined; re-checked on every notify(). */
class Waiters {
  #list = [];
  wait(check, what, timeoutMs = 10_000) {
    const v = check();
    if (v !== undefined) return Promise.resolve(v);
    return new Promise((resolve, reject) => {
      const w = { check, resolve };
      w.timer = setTimeout(() => {
        this.#list = this.#list.filter((x) => x !== w);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what()}`));
      }, timeoutMs);
      this.#list.push(w);
    });
  }
  notify() {
    this.#list = this.#list.filter((w) => {
      const v = w.check();
      if (v === undefined) return true;
      clearTimeout(w.timer);
      w.resolve(v);
      return false;
    });
  }
}

export class FakeConnection {
  #waiters = new Waiters();
  constructor(ws, req) {
    this.ws = ws;
    this.ticket = new URL(req.url, 'http://localhost').searchParams.get('ticket');
    this.frames = [];
    this.closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
    ws.on('message', (data) => {
      this.frames.push(JSON.parse(data.toString()));
      this.#waiters.notify();
    });
  }

  /** The first frame received that satisfies pred, once it has come. */
  frame(pred = () => true) {
    return this.#waiters.wait(() => this.frames.find(pred), () => `a matching frame; got ${JSON.stringify(this.frames)}`);
  }

  /** Every frame received, once there are at least n. */
  count(n) {
    return this.#waiters.wait(() => (this.frames.length >= n ? this.frames : undefined),
      () => `${n} frames; got ${JSON.stringify(this.frames)}`);
  }

  /** Every frame received but resume frames (each socket opens with one), once there are at least n. */
  sent(n) {
    const rest = () => this.frames.filter((f) => f.event !== 'resume');
    return this.#waiters.wait(() => (rest().length >= n ? rest() : undefined),
      () => `${n} frames besides resume; got ${JSON.stringify(this.frames)}`);
  }

  send(frame) { this.ws.send(JSON.stringify(frame)); }
  close(code, reason) { this.ws.close(code, reason); }
  drop() { this.ws.terminate(); }
}

export async function fakeServer() {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(wss, 'listening');
  const connections = [];
  const waiters = new Waiters();
  wss.on('connection', (ws, req) => {
    connections.push(new FakeConnection(ws, req));
    waiters.notify();
  });
  return {
    url: `http://127.0.0.1:${wss.address().port}`,
    connections,
    /** The n-th connection (0-based), once it has come. */
    connection(n) {
      return waiters.wait(() => connections[n], () => `connection ${n}; have ${connections.length}`);
    },
    async close() {
      for (const c of connections) c.ws.terminate();
      await new Promise((resolve) => wss.close(resolve));
    },
  };
}
