// RealtimeClient: one logical connection to Switchboard's WebSocket that
// survives sockets. See ../README.md for the guarantees.

import { backoffDelay, DEFAULT_BACKOFF, DEFAULT_RATE_LIMITED_BACKOFF } from './backoff.js';
import { StreamTracker } from './streams.js';
import { PresenceBook } from './presence.js';

/** Close codes of docs/api.md. */
export const CloseCodes = Object.freeze({
  NORMAL: 1000,
  GOING_AWAY: 1001,
  TOO_BIG: 1009,
  SLOW_CONSUMER: 3008,
  DISCONNECTED_BY_OPERATOR: 4001,
  RATE_LIMITED: 4029,
});

/** Frames sent with send() that are re-sent after a drop unless told otherwise. */
const RETRIED_BY_DEFAULT = new Set(['room.message', 'dm']);
const OPEN = 1;
/** Frames the client manages: sending them by hand would desynchronise its rooms and positions. */
const MANAGED = new Map([['room.join', 'join(room)'], ['room.leave', 'leave(room)'], ['resume', 'options.streams']]);

// A promise whose rejection is not an unhandled rejection when the caller ignores it
// (client.join('lobby') without await); callers that await it still see it.
function quiet(p) {
  p.catch(() => {});
  return p;
}

const DEFAULTS = {
  stableMs: 10_000,
  connectTimeoutMs: 15_000,
  resumeTimeoutMs: 10_000,
  confirmMs: 1_000,
  maxQueue: 1_000,
  sendRate: 15,
  sendBurst: 30,
};

export class RealtimeClient extends EventTarget {
  #o;
  #tracker;
  #rooms = new Map(); // room -> {waiters: [{resolve, reject}]}
  #outbox = []; // {data, retry, control, event, room?}
  #inflight = []; // {item, at} retryable frames written to the current socket
  #ws = null;
  #state = 'idle';
  #failures = 0;
  #openedAt = 0;
  #timer = null;
  #connectTimer = null;
  #resumeTimer = null;
  #pumpTimer = null;
  #tokens;
  #tokensAt = 0;
  #pausedUntil = 0;
  #seq = 0;
  #connectWaiters = [];
  #resumeId = null;
  #presence = new PresenceBook();

  /** @param {import('../index.js').RealtimeOptions} options */
  constructor(options = {}) {
    super();
    if (typeof options.getTicket !== 'function') throw new TypeError('RealtimeClient: getTicket must be a function returning a ticket');
    const WS = options.WebSocket ?? globalThis.WebSocket;
    if (typeof WS !== 'function') {
      throw new TypeError('RealtimeClient: no WebSocket constructor; pass options.WebSocket (in Node 20, the ws package)');
    }
    const url = options.url ?? globalThis.location?.origin;
    if (!url) throw new TypeError('RealtimeClient: options.url is required outside a browser page');
    this.#o = {
      ...DEFAULTS,
      ...options,
      WebSocket: WS,
      url,
      random: options.random ?? Math.random,
      now: options.now ?? Date.now,
      backoff: { ...DEFAULT_BACKOFF, ...options.backoff },
      rateLimitedBackoff: { ...DEFAULT_RATE_LIMITED_BACKOFF, ...options.rateLimitedBackoff },
    };
    this.#tokens = this.#o.sendBurst;
    this.#tracker = new StreamTracker(options.streams);
  }

  /** 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed' */
  get state() { return this.#state; }

  /** Rooms this client is in (or will rejoin on the next socket). */
  get rooms() { return [...this.#rooms.keys()]; }

  /**
   * User ids present in a joined room over every replica (presence.join /
   * presence.leave, on top of options.getPresence's snapshot); undefined
   * for a room not joined.
   */
  presence(room) { return this.#presence.members(room); }

  /** Frames waiting to be written. */
  get queued() { return this.#outbox.filter((i) => !i.control).length; }

  /** Duplicate stored events dropped so far. */
  get duplicates() { return this.#tracker.duplicates; }

  /** {stream: {epoch, offset, recovered}}: positions to persist and pass back as options.streams. */
  streams() { return this.#tracker.snapshot(); }

  /** Listens to one event; returns a function that stops listening. */
  on(type, fn) {
    const listener = (e) => fn(e.detail);
    this.addEventListener(type, listener);
    return () => this.removeEventListener(type, listener);
  }

  /** Starts connecting; resolves when the first socket is open. */
  connect() {
    if (this.#state === 'closed') return Promise.reject(new Error('RealtimeClient is closed'));
    const p = quiet(new Promise((resolve, reject) => this.#connectWaiters.push({ resolve, reject })));
    if (this.#state === 'open') this.#settleConnect(null);
    else if (this.#state === 'idle') this.#attempt();
    return p;
  }

  /** Joins a room (now, and on every later socket); resolves on room.joined. */
  join(room) {
    if (this.#state === 'closed') return Promise.reject(new Error('RealtimeClient is closed'));
    let entry = this.#rooms.get(room);
    const p = quiet(new Promise((resolve, reject) => {
      if (!entry) this.#rooms.set(room, (entry = { waiters: [] }));
      entry.waiters.push({ resolve, reject });
    }));
    if (this.#isOpen()) this.#enqueue(this.#joinItem(room), true);
    return p;
  }

  /** Leaves a room; its stream position is forgotten (joining again is live only). */
  leave(room) {
    const entry = this.#rooms.get(room);
    if (!entry) return;
    this.#rooms.delete(room);
    this.#presence.forget(room);
    for (const w of entry.waiters) w.reject(new Error(`left room ${room}`));
    this.#tracker.forget(`room:${room}`);
    this.#outbox = this.#outbox.filter((i) => !(i.control && i.room === room));
    if (this.#isOpen()) this.#enqueue(this.#item({ event: 'room.leave', room }, { control: true }), false);
  }

  /**
   * Queues a frame ({event, room?, to?, id?, payload?}); written now if a
   * socket is open, else after the next one has resumed. Returns false when
   * the queue is full and the frame was dropped.
   */
  send(frame, { retry } = {}) {
    if (this.#state === 'closed') throw new Error('RealtimeClient is closed');
    if (!frame || typeof frame.event !== 'string') throw new TypeError('send: frame needs an "event"');
    if (MANAGED.has(frame.event)) throw new TypeError(`send: use ${MANAGED.get(frame.event)}, the client sends ${frame.event} itself`);
    if (this.queued >= this.#o.maxQueue) return false;
    this.#enqueue(this.#item(frame, { retry: retry ?? RETRIED_BY_DEFAULT.has(frame.event) }), false);
    return true;
  }

  /** Closes for good: no reconnect, queued frames are dropped. */
  close(code = CloseCodes.NORMAL, reason = 'client closed') {
    if (this.#state === 'closed') return;
    this.#finish({ code, reason, byClient: true });
  }

  // ---- connecting ----

  async #attempt() {
    this.#setState(this.#failures === 0 && this.#openedAt === 0 ? 'connecting' : 'reconnecting');
    let ticket;
    try {
      ticket = await this.#o.getTicket();
    } catch (error) {
      if (this.#state === 'closed') return;
      this.#emit('error', { phase: 'ticket', error });
      if (error && error.retry === false) return this.#finish({ code: 0, reason: 'ticket refused', error });
      return this.#retry({ code: 0, reason: 'ticket failed' });
    }
    if (this.#state === 'closed') return;
    let ws;
    try {
      ws = new this.#o.WebSocket(this.#socketURL(ticket));
    } catch (error) {
      this.#emit('error', { phase: 'connect', error });
      return this.#retry({ code: 0, reason: 'connect failed' });
    }
    this.#ws = ws;
    this.#connectTimer = setTimeout(() => ws.close(), this.#o.connectTimeoutMs);
    ws.onopen = () => this.#onOpen(ws);
    ws.onmessage = (ev) => this.#onMessage(ws, ev.data);
    ws.onclose = (ev) => this.#onClose(ws, ev.code, ev.reason);
    ws.onerror = () => {}; // a close follows
  }

  #socketURL(ticket) {
    const base = typeof this.#o.url === 'function' ? this.#o.url() : this.#o.url;
    const u = new URL(base);
    if (u.protocol === 'http:') u.protocol = 'ws:';
    if (u.protocol === 'https:') u.protocol = 'wss:';
    if (!u.pathname.endsWith('/v1/ws')) u.pathname = u.pathname.replace(/\/+$/, '') + '/v1/ws';
    u.searchParams.set('ticket', ticket);
    return u.toString();
  }

  #onOpen(ws) {
    if (ws !== this.#ws) return;
    clearTimeout(this.#connectTimer);
    this.#openedAt = this.#o.now();
    this.#setState('open');
    this.#outbox = this.#outbox.filter((i) => !i.control);
    this.#outbox.unshift(...this.#resumeItems());
    this.#emit('open', { attempt: this.#failures + 1 });
    this.#settleConnect(null);
    this.#pump();
  }

  // The resume frame and a room.join per room. The resume goes first on every socket, naming
  // the streams there is a position in (none on a first connect): the server then delivers at
  // once (it holds a new socket's streams for this first frame) and its `resumed` answer gives
  // the position of every stream the socket follows, so a later resume misses nothing of a
  // stream that had no event yet.
  #resumeItems() {
    const rooms = this.rooms;
    const wanted = [...this.#tracker.positions.keys()].filter((s) => !s.startsWith('room:') || this.#rooms.has(s.slice(5)));
    const items = [];
    this.#tracker.beginResume(wanted);
    this.#resumeId = `resume-${++this.#seq}`;
    items.push(this.#item({ event: 'resume', id: this.#resumeId, payload: { streams: this.#tracker.resumePayload(wanted) } }, { control: true }));
    clearTimeout(this.#resumeTimer);
    this.#resumeTimer = setTimeout(() => this.#resumeTimedOut(), this.#o.resumeTimeoutMs);
    // The server's resume joins the rooms it names; a plain room.join as well keeps the
    // membership if it refused the resume, and changes nothing otherwise.
    for (const room of rooms) items.push(this.#joinItem(room, wanted.includes(`room:${room}`)));
    return items;
  }

  // A room.join, with the room's position unless the resume frame carries it
  // (a second positioned follow would supersede the resume's).
  #joinItem(room, resumed = false) {
    const pos = resumed ? undefined : this.#tracker.get(`room:${room}`);
    const frame = { event: 'room.join', room, id: `join-${++this.#seq}` };
    if (pos) frame.payload = { offset: pos.offset, epoch: pos.epoch };
    return this.#item(frame, { control: true });
  }

  #resumeTimedOut() {
    this.#emit('error', { phase: 'resume', error: new Error(`no resumed frame within ${this.#o.resumeTimeoutMs} ms`) });
    this.#apply(this.#tracker.endResume());
  }

  // ---- receiving ----

  #onMessage(ws, data) {
    if (ws !== this.#ws) return;
    let frame;
    try {
      frame = JSON.parse(typeof data === 'string' ? data : new TextDecoder().decode(data));
    } catch (error) {
      return this.#emit('error', { phase: 'frame', error });
    }
    if (!frame || typeof frame !== 'object') return;
    switch (frame.event) {
      case 'resumed':
        return this.#onResumed(frame.payload?.streams);
      case 'room.joined':
        this.#onJoined(frame);
        break;
      case 'room.removed':
        this.#onRemoved(frame);
        break;
      case 'project.removed':
        this.#onProjectRemoved(frame);
        break;
      case 'error':
        this.#onServerError(frame);
        break;
      case 'presence.join':
      case 'presence.leave':
        this.#onPresence(this.#presence.frame(frame));
        break;
    }
    this.#apply(this.#tracker.accept(frame));
  }

  #onResumed(streams) {
    const actions = this.#tracker.resumed(streams);
    if (this.#tracker.resuming.size === 0) clearTimeout(this.#resumeTimer);
    this.#apply(actions);
    this.#emit('resumed', { streams: Object.fromEntries(Object.entries(streams ?? {}).map(([s, r]) => [s, { ...r }])) });
  }

  #onJoined(frame) {
    const entry = this.#rooms.get(frame.room);
    if (!entry) return;
    this.#loadPresence(frame.room);
    for (const w of entry.waiters.splice(0)) w.resolve();
  }

  // Evicted (removed from a members-only room, or the room was deleted): the room is
  // forgotten, so no later socket rejoins it.
  #onRemoved(frame) {
    const room = frame.payload?.room ?? frame.room;
    const reason = frame.payload?.reason ?? 'removed';
    const entry = this.#rooms.get(room);
    if (entry) {
      this.#rooms.delete(room);
      for (const w of entry.waiters) w.reject(new Error(`removed from room ${room} (${reason})`));
    }
    this.#tracker.forget(`room:${room}`);
    this.#presence.forget(room);
    this.#outbox = this.#outbox.filter((i) => !(i.control && i.room === room));
    this.#emit('room.removed', { room, reason });
  }

  // No longer a member of a project (removed, left, or the project deleted): the socket
  // stopped following project:<id>, so its position is forgotten and not named in the
  // next resume (a membership given back reaches sockets opened after it, from live).
  #onProjectRemoved(frame) {
    const project = frame.payload?.project;
    if (typeof project !== 'string') return;
    this.#tracker.forget(`project:${project}`);
    this.#emit('project.removed', { project, reason: frame.payload?.reason ?? 'removed' });
  }

  // After each room.joined: members afresh, from options.getPresence's snapshot when given.
  async #loadPresence(room) {
    const get = this.#o.getPresence;
    const gen = this.#presence.joined(room, typeof get === 'function');
    if (typeof get !== 'function') return;
    try {
      const snap = await get(room);
      const members = this.#presence.snapshot(room, gen, Array.isArray(snap?.users) ? snap.users : []);
      if (members) this.#emit('presence', { room, members, snapshot: true });
    } catch (error) {
      const members = this.#presence.snapshotFailed(room, gen);
      this.#emit('error', { phase: 'presence', error });
      if (members) this.#emit('presence', { room, members, snapshot: false });
    }
  }

  #onPresence(change) {
    if (change) this.#emit('presence', change);
  }

  #onServerError(frame) {
    const p = frame.payload ?? {};
    if (p.code === 'rate_limited' && Number.isFinite(p.retry_after_ms)) {
      this.#pausedUntil = this.#o.now() + p.retry_after_ms;
    }
    if (frame.id && frame.id === this.#resumeId) {
      // This server does not resume: deliver what was held and go on live.
      this.#resumeId = null;
      clearTimeout(this.#resumeTimer);
      this.#apply(this.#tracker.endResume());
    }
    if (typeof frame.id === 'string' && frame.id.startsWith('join-')) this.#joinRefused(frame.id, p.message);
  }

  #joinRefused(id, message) {
    const item = this.#sentJoins.get(id);
    this.#sentJoins.delete(id);
    if (!item) return;
    const entry = this.#rooms.get(item.room);
    if (!entry) return;
    this.#rooms.delete(item.room);
    this.#tracker.forget(`room:${item.room}`);
    for (const w of entry.waiters) w.reject(new Error(message ?? `room.join ${item.room} refused`));
  }

  #sentJoins = new Map();

  #apply(actions) {
    for (const a of actions) {
      if (a.type === 'deliver') {
        this.#emit('message', a.frame);
        if (typeof a.frame.event === 'string') this.#emit(`message:${a.frame.event}`, a.frame);
      } else {
        const { type, ...detail } = a;
        this.#emit(type, detail);
      }
    }
  }

  // ---- sending ----

  #item(frame, { retry = false, control = false } = {}) {
    return { data: JSON.stringify(frame), retry, control, event: frame.event, room: frame.room, id: frame.id };
  }

  #enqueue(item, front) {
    if (front) {
      const at = this.#outbox.findIndex((i) => !i.control);
      this.#outbox.splice(at < 0 ? this.#outbox.length : at, 0, item);
    } else {
      this.#outbox.push(item);
    }
    this.#pump();
  }

  #isOpen() {
    return this.#state === 'open' && this.#ws && this.#ws.readyState === OPEN;
  }

  // Writes queued frames within the send rate (a token bucket under the server's default limits).
  #pump() {
    if (this.#pumpTimer || !this.#isOpen()) return;
    while (this.#outbox.length > 0) {
      const wait = this.#waitForToken();
      if (wait > 0) {
        this.#pumpTimer = setTimeout(() => { this.#pumpTimer = null; this.#pump(); }, wait);
        return;
      }
      const item = this.#outbox.shift();
      try {
        this.#ws.send(item.data);
      } catch {
        this.#outbox.unshift(item);
        return;
      }
      this.#tokens -= 1;
      if (item.event === 'room.join') this.#sentJoins.set(item.id, item);
      if (item.retry) this.#inflight.push({ item, at: this.#o.now() });
    }
    this.#pruneInflight(this.#o.now());
  }

  #waitForToken() {
    const now = this.#o.now();
    if (now < this.#pausedUntil) return this.#pausedUntil - now;
    this.#tokens = Math.min(this.#o.sendBurst, this.#tokens + ((now - this.#tokensAt) / 1000) * this.#o.sendRate);
    this.#tokensAt = now;
    if (this.#tokens >= 1) return 0;
    return Math.ceil(((1 - this.#tokens) / this.#o.sendRate) * 1000);
  }

  #pruneInflight(now) {
    this.#inflight = this.#inflight.filter((f) => now - f.at < this.#o.confirmMs);
  }

  // ---- closing ----

  #onClose(ws, code, reason) {
    if (ws !== this.#ws) return;
    this.#detach();
    const wasStable = this.#openedAt > 0 && this.#o.now() - this.#openedAt >= this.#o.stableMs;
    this.#requeueInflight();
    if (this.#state === 'closed') return;
    if (code === CloseCodes.DISCONNECTED_BY_OPERATOR) {
      return this.#finish({ code, reason: reason || 'disconnected by an operator' });
    }
    if (wasStable) this.#failures = 0;
    this.#retry({ code, reason });
  }

  #detach() {
    clearTimeout(this.#connectTimer);
    clearTimeout(this.#resumeTimer);
    clearTimeout(this.#pumpTimer);
    this.#pumpTimer = null;
    this.#ws = null;
    this.#sentJoins.clear();
    this.#tracker.abandonResume();
    this.#outbox = this.#outbox.filter((i) => !i.control);
  }

  // Retryable frames written shortly before the drop may not have reached the server: again, in order.
  #requeueInflight() {
    this.#pruneInflight(this.#o.now());
    this.#outbox.unshift(...this.#inflight.map((f) => f.item));
    this.#inflight = [];
  }

  #retry({ code, reason }) {
    this.#failures++;
    const policy = code === CloseCodes.RATE_LIMITED ? this.#o.rateLimitedBackoff : this.#o.backoff;
    const delayMs = backoffDelay(this.#failures, policy, this.#o.random);
    this.#setState('reconnecting');
    this.#emit('close', { code, reason, reconnect: true, delayMs });
    this.#emit('reconnecting', { attempt: this.#failures, delayMs, code });
    this.#timer = setTimeout(() => { this.#timer = null; this.#attempt(); }, delayMs);
  }

  #finish({ code, reason, byClient = false, error }) {
    const ws = this.#ws;
    this.#detach();
    clearTimeout(this.#timer);
    this.#timer = null;
    this.#outbox = [];
    this.#inflight = [];
    this.#setState('closed');
    if (ws && byClient) {
      try { ws.close(code, reason); } catch { ws.close(); }
    }
    const err = error ?? new Error(`closed: ${code} ${reason}`);
    this.#settleConnect(err);
    for (const [, entry] of this.#rooms) for (const w of entry.waiters.splice(0)) w.reject(err);
    this.#emit('close', { code, reason, reconnect: false });
  }

  #settleConnect(err) {
    for (const w of this.#connectWaiters.splice(0)) (err ? w.reject(err) : w.resolve());
  }

  #setState(state) {
    if (this.#state === state) return;
    this.#state = state;
    this.#emit('state', { state });
  }

  #emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }
}
