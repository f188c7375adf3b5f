// RealtimeClient against an in-process fake server: the protocol, frame by frame.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { RealtimeClient, CloseCodes } from '../../src/index.js';
import { fakeServer } from '../support/fake-server.js';
import { nextEvent, collect, until } from '../support/wait.js';

const U = 'user:11111111-1111-4111-8111-111111111111';

async function setup(t, opts = {}) {
  const server = await fakeServer();
  let tickets = 0;
  const client = new RealtimeClient({
    url: server.url,
    WebSocket,
    getTicket: async () => `t${++tickets}`,
    backoff: { initialMs: 5, maxMs: 40 },
    rateLimitedBackoff: { initialMs: 50, maxMs: 400, floor: 0.5 },
    random: () => 1,
    ...opts,
  });
  t.after(async () => { client.close(); await server.close(); });
  return { server, client, tickets: () => tickets };
}

const stored = (stream, offset, epoch = 'e1', extra = {}) => ({ event: 'dm', stream, offset, epoch, payload: { n: offset }, ...extra });
const offsets = (msgs, stream) => msgs.filter((m) => m.stream === stream).map((m) => m.offset);

test('connects to /v1/ws with a fresh ticket per socket', async (t) => {
  const { server, client, tickets } = await setup(t);
  await client.connect();
  const c0 = await server.connection(0);
  assert.equal(c0.ticket, 't1');
  assert.equal(client.state, 'open');
  c0.close(CloseCodes.GOING_AWAY, 'node shutting down');
  const c1 = await server.connection(1);
  assert.equal(c1.ticket, 't2');
  assert.equal(tickets(), 2);
});

test('reconnect delays grow exponentially (full jitter, capped) and reset after a stable socket', async (t) => {
  const { server, client } = await setup(t, { stableMs: 60_000 });
  const delays = collect(client, 'reconnecting');
  await client.connect();
  for (let i = 0; i < 5; i++) {
    (await server.connection(i)).drop();
    await server.connection(i + 1);
  }
  assert.deepEqual(delays.map((d) => d.delayMs), [5, 10, 20, 40, 40]);
  assert.deepEqual(delays.map((d) => d.attempt), [1, 2, 3, 4, 5]);
});

test('a socket open for stableMs resets the backoff', async (t) => {
  const { server, client } = await setup(t, { stableMs: 0 });
  const delays = collect(client, 'reconnecting');
  await client.connect();
  for (let i = 0; i < 3; i++) {
    (await server.connection(i)).drop();
    await server.connection(i + 1);
  }
  assert.deepEqual(delays.map((d) => d.delayMs), [5, 5, 5]);
});

test('jitter comes from random()', async (t) => {
  const { server, client } = await setup(t, { random: () => 0.25, backoff: { initialMs: 40, maxMs: 400 } });
  const delays = collect(client, 'reconnecting');
  await client.connect();
  (await server.connection(0)).drop();
  await server.connection(1);
  assert.deepEqual(delays.map((d) => d.delayMs), [10]);
});

test('4001 (disconnected by an operator) closes for good', async (t) => {
  const { server, client, tickets } = await setup(t);
  const closes = collect(client, 'close');
  await client.connect();
  (await server.connection(0)).close(CloseCodes.DISCONNECTED_BY_OPERATOR, 'disconnected by an operator');
  await until(client, 'state', () => client.state === 'closed');
  assert.deepEqual(closes, [{ code: 4001, reason: 'disconnected by an operator', reconnect: false }]);
  assert.equal(tickets(), 1);
  assert.throws(() => client.send({ event: 'typing', room: 'x' }), /closed/);
  await assert.rejects(client.join('x'), /closed/);
});

test('4029 (rate limited) reconnects with the longer backoff', async (t) => {
  const { server, client } = await setup(t);
  const delays = collect(client, 'reconnecting');
  await client.connect();
  (await server.connection(0)).close(CloseCodes.RATE_LIMITED, 'rate limited');
  await server.connection(1);
  (await server.connection(1)).close(CloseCodes.GOING_AWAY, 'bye');
  await server.connection(2);
  assert.deepEqual(delays.map((d) => [d.code, d.delayMs]), [[4029, 50], [1001, 10]]);
});

test('a failing ticket function is retried with backoff; retry:false stops', async (t) => {
  const server = await fakeServer();
  let calls = 0;
  const client = new RealtimeClient({
    url: server.url, WebSocket, random: () => 1, backoff: { initialMs: 5, maxMs: 5 },
    getTicket: async () => {
      calls++;
      if (calls === 1) throw new Error('503');
      if (calls === 3) throw Object.assign(new Error('401: log in again'), { retry: false });
      return `t${calls}`;
    },
  });
  t.after(async () => { client.close(); await server.close(); });
  const errors = collect(client, 'error');
  await client.connect();
  assert.equal((await server.connection(0)).ticket, 't2');
  server.connections[0].drop();
  await until(client, 'state', () => client.state === 'closed');
  assert.deepEqual(errors.map((e) => [e.phase, e.error.message]), [['ticket', '503'], ['ticket', '401: log in again']]);
});

test('join: room.join on open, resolves on room.joined; rejoined on every socket', async (t) => {
  const { server, client } = await setup(t);
  const joined = client.join('lobby');
  client.connect();
  const c0 = await server.connection(0);
  const j = await c0.frame((f) => f.event === 'room.join');
  assert.equal(j.room, 'lobby');
  assert.equal(j.payload, undefined, 'no position yet: live only');
  c0.send({ event: 'room.joined', room: 'lobby' });
  await joined;
  assert.deepEqual(client.rooms, ['lobby']);
  c0.drop();
  const c1 = await server.connection(1);
  assert.equal((await c1.frame((f) => f.event === 'room.join')).room, 'lobby');
});

test('a refused join rejects and is not rejoined', async (t) => {
  const { server, client } = await setup(t);
  await client.connect();
  const c0 = await server.connection(0);
  const p = client.join(' bad');
  const j = await c0.frame((f) => f.event === 'room.join');
  c0.send({ event: 'error', id: j.id, payload: { message: 'room name has white space' } });
  await assert.rejects(p, /white space/);
  assert.deepEqual(client.rooms, []);
});

test('leave sends room.leave and forgets the position', async (t) => {
  const { server, client } = await setup(t);
  await client.connect();
  const c0 = await server.connection(0);
  client.join('lobby');
  await c0.frame((f) => f.event === 'room.join');
  c0.send({ event: 'room.joined', room: 'lobby' });
  c0.send(stored('room:lobby', 4, 'e1', { event: 'room.message', room: 'lobby' }));
  await nextEvent(client, 'message', (m) => m.offset === 4);
  client.leave('lobby');
  assert.equal((await c0.frame((f) => f.event === 'room.leave')).room, 'lobby');
  assert.equal(client.streams()['room:lobby'], undefined);
});

test('dedupe and order: duplicates dropped, events delivered once in offset order', async (t) => {
  const { server, client } = await setup(t);
  const msgs = collect(client, 'message');
  await client.connect();
  const c0 = await server.connection(0);
  for (const o of [1, 2, 2, 3, 1, 4]) c0.send(stored(U, o));
  c0.send({ event: 'typing', from: 'x' });
  await until(client, 'message', () => msgs.some((m) => m.event === 'typing'));
  assert.deepEqual(offsets(msgs, U), [1, 2, 3, 4]);
  assert.equal(client.duplicates, 2);
});

test('resume: positions sent on reconnect, catch-up reordered and deduped, recovered flag set', async (t) => {
  const { server, client } = await setup(t);
  const msgs = collect(client, 'message');
  const dms = collect(client, 'message:dm');
  client.join('lobby');
  await client.connect();
  const c0 = await server.connection(0);
  await c0.frame((f) => f.event === 'room.join');
  c0.send({ event: 'room.joined', room: 'lobby' });
  for (const o of [1, 2, 3]) c0.send(stored(U, o, 'eu'));
  for (const o of [1, 2]) c0.send(stored('room:lobby', o, 'er', { event: 'room.message', room: 'lobby' }));
  await until(client, 'message', () => msgs.length === 6);
  c0.drop();

  const c1 = await server.connection(1);
  const frames = await c1.count(2);
  assert.deepEqual(frames[0].event, 'resume', 'resume is the first frame');
  assert.deepEqual(frames[0].payload, { streams: { [U]: { offset: 3, epoch: 'eu' }, 'room:lobby': { offset: 2, epoch: 'er' } } });
  assert.equal(frames[1].event, 'room.join');
  assert.equal(frames[1].payload, undefined, 'the resume frame carries the position (and joins); the join has none');
  // Catch-up out of order, with a duplicate of what was delivered and a live event twice.
  for (const o of [3, 5, 4, 6]) c1.send(stored(U, o, 'eu'));
  c1.send(stored('room:lobby', 3, 'er', { event: 'room.message', room: 'lobby' }));
  c1.send({ event: 'room.joined', room: 'lobby' });
  const resumed = nextEvent(client, 'resumed');
  c1.send({ event: 'resumed', payload: { streams: { [U]: { recovered: true, epoch: 'eu', offset: 6 }, 'room:lobby': { recovered: true, epoch: 'er', offset: 3 } } } });
  const r = await resumed;
  assert.equal(r.streams[U].recovered, true);
  c1.send(stored(U, 6, 'eu'));
  c1.send(stored(U, 7, 'eu'));
  await until(client, 'message', () => msgs.some((m) => m.offset === 7));
  assert.deepEqual(offsets(msgs, U), [1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(offsets(msgs, 'room:lobby'), [1, 2, 3]);
  assert.deepEqual(offsets(dms, U), [1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(client.streams(), {
    [U]: { epoch: 'eu', offset: 7, recovered: true },
    'room:lobby': { epoch: 'er', offset: 3, recovered: true },
  });
});

test('recovered:false emits reset (the app refetches), then live events go on', async (t) => {
  const { server, client } = await setup(t);
  const msgs = collect(client, 'message');
  const resets = collect(client, 'reset');
  await client.connect();
  const c0 = await server.connection(0);
  c0.send(stored(U, 41, 'e1'));
  await until(client, 'message', () => msgs.length === 1);
  c0.drop();
  const c1 = await server.connection(1);
  assert.deepEqual((await c1.frame((f) => f.event === 'resume')).payload.streams, { [U]: { offset: 41, epoch: 'e1' } });
  c1.send({ event: 'resumed', payload: { streams: { [U]: { recovered: false, epoch: 'e3', offset: 1200 } } } });
  await until(client, 'reset', () => resets.length === 1);
  assert.deepEqual(resets[0], { stream: U, reason: 'not_recovered', epoch: 'e3', offset: 1200, previous: { epoch: 'e1', offset: 41 } });
  c1.send(stored(U, 1200, 'e3'));
  c1.send(stored(U, 1201, 'e3'));
  await until(client, 'message', () => msgs.length === 2);
  assert.deepEqual(msgs.map((m) => m.offset), [41, 1201]);
  assert.equal(client.streams()[U].recovered, false);
});

test('a first socket opens with an empty resume; the streams its answer names are resumed after a drop', async (t) => {
  const I = 'inbox:11111111-1111-4111-8111-111111111111';
  const { server, client } = await setup(t);
  const resumed = nextEvent(client, 'resumed');
  await client.connect();
  const c0 = await server.connection(0);
  const first = await c0.frame();
  assert.equal(first.event, 'resume');
  assert.deepEqual(first.payload.streams, {});
  // The server names every stream the socket follows, with where it starts: no event came yet.
  c0.send({ event: 'resumed', payload: { streams: { [U]: { recovered: true, epoch: '', offset: 0 }, [I]: { recovered: true, epoch: 'ei', offset: 4 } } } });
  await resumed;
  c0.drop();
  const c1 = await server.connection(1);
  assert.deepEqual((await c1.frame((f) => f.event === 'resume')).payload.streams, { [U]: { offset: 0, epoch: '' }, [I]: { offset: 4, epoch: 'ei' } });
});

test('project.removed forgets the project stream: the next resume does not name it', async (t) => {
  const P = 'project:22222222-2222-4222-8222-222222222222';
  const { server, client } = await setup(t);
  const removed = collect(client, 'project.removed');
  await client.connect();
  const c0 = await server.connection(0);
  c0.send(stored(U, 3));
  c0.send(stored(P, 5, 'ep', { event: 'task.run.queued' }));
  await until(client, 'message', () => client.streams()[P]?.offset === 5);
  c0.send({ event: 'project.removed', payload: { project: P.slice(8), reason: 'removed' } });
  await until(client, 'project.removed', () => removed.length === 1);
  assert.deepEqual(removed, [{ project: P.slice(8), reason: 'removed' }]);
  assert.deepEqual(Object.keys(client.streams()), [U]);
  c0.drop();
  const c1 = await server.connection(1);
  assert.deepEqual((await c1.frame((f) => f.event === 'resume')).payload.streams, { [U]: { offset: 3, epoch: 'e1' } });
});

test('project.removed answering a resume ends the wait for that stream', async (t) => {
  const P = 'project:33333333-3333-4333-8333-333333333333';
  const { server, client } = await setup(t, { streams: { [U]: { offset: 1, epoch: 'e1' }, [P]: { offset: 4, epoch: 'ep' } } });
  const resumed = nextEvent(client, 'resumed');
  await client.connect();
  const c0 = await server.connection(0);
  assert.deepEqual(Object.keys((await c0.frame((f) => f.event === 'resume')).payload.streams).sort(), [P, U].sort());
  c0.send({ event: 'project.removed', payload: { project: P.slice(8), reason: 'deleted' } });
  c0.send({ event: 'resumed', payload: { streams: { [U]: { recovered: true, epoch: 'e1', offset: 1 } } } });
  await resumed;
  assert.deepEqual(client.streams(), { [U]: { epoch: 'e1', offset: 1, recovered: true } });
});

test('positions passed in options.streams are resumed by the first socket', async (t) => {
  const { server, client } = await setup(t, { streams: { [U]: { offset: 9, epoch: 'e1' } } });
  await client.connect();
  const c0 = await server.connection(0);
  assert.deepEqual((await c0.frame()).payload, { streams: { [U]: { offset: 9, epoch: 'e1' } } });
});

test('a server that refuses resume (error with its id) does not hold events back', async (t) => {
  const { server, client } = await setup(t, { streams: { [U]: { offset: 9, epoch: 'e1' } } });
  const msgs = collect(client, 'message');
  await client.connect();
  const c0 = await server.connection(0);
  const resume = await c0.frame((f) => f.event === 'resume');
  c0.send(stored(U, 12, 'e1'));
  c0.send({ event: 'error', id: resume.id, payload: { message: 'unknown event "resume"' } });
  await until(client, 'message', () => msgs.some((m) => m.offset === 12));
});

test('send: queued while disconnected, written after resume and rejoin, in order; typing not retried', async (t) => {
  const { server, client } = await setup(t, { confirmMs: 0 });
  client.join('lobby');
  client.send({ event: 'room.message', room: 'lobby', payload: { n: 1 } });
  client.send({ event: 'typing', room: 'lobby' });
  client.send({ event: 'room.message', room: 'lobby', payload: { n: 2 } });
  assert.equal(client.queued, 3);
  await client.connect();
  const c0 = await server.connection(0);
  const frames = await c0.sent(4);
  assert.equal(c0.frames[0].event, 'resume', 'every socket opens with a resume');
  assert.deepEqual(frames.map((f) => f.event), ['room.join', 'room.message', 'typing', 'room.message']);
  assert.deepEqual(frames.filter((f) => f.payload?.n).map((f) => f.payload.n), [1, 2]);
  assert.equal(client.queued, 0);
});

test('send: stored frames written just before a drop are sent again (so possibly twice); typing is not', async (t) => {
  const { server, client } = await setup(t, { confirmMs: 60_000 });
  await client.connect();
  const c0 = await server.connection(0);
  client.send({ event: 'room.message', room: 'lobby', payload: { n: 1 } });
  client.send({ event: 'typing', room: 'lobby' });
  client.send({ event: 'dm', to: 'u2', payload: { n: 2 } });
  client.send({ event: 'room.message', room: 'lobby', payload: { n: 3 } }, { retry: false });
  await c0.sent(4);
  c0.drop();
  const c1 = await server.connection(1);
  const again = await c1.sent(2);
  assert.deepEqual(again.map((f) => [f.event, f.payload.n]), [['room.message', 1], ['dm', 2]]);
});

test('send: frames older than confirmMs are not sent again', async (t) => {
  const { server, client } = await setup(t, { confirmMs: 0 });
  await client.connect();
  const c0 = await server.connection(0);
  client.send({ event: 'room.message', room: 'lobby', payload: { n: 1 } });
  await c0.sent(1);
  c0.drop();
  const c1 = await server.connection(1);
  client.send({ event: 'typing', room: 'lobby' });
  const frames = await c1.sent(1);
  assert.deepEqual(frames.map((f) => f.event), ['typing']);
});

test('send: the queue is bounded', async (t) => {
  const { client } = await setup(t, { maxQueue: 2 });
  assert.equal(client.send({ event: 'typing', to: 'u' }), true);
  assert.equal(client.send({ event: 'typing', to: 'u' }), true);
  assert.equal(client.send({ event: 'typing', to: 'u' }), false);
  assert.throws(() => client.send({}), /needs an "event"/);
  assert.throws(() => client.send({ event: 'room.join', room: 'x' }), /use join\(room\)/);
  assert.throws(() => client.send({ event: 'resume', payload: {} }), /options.streams/);
});

test('send: frames are paced under the server rate limits', async (t) => {
  let clock = 1_000_000;
  let frozen = true;
  const { server, client } = await setup(t, { sendRate: 1000, sendBurst: 3, now: () => (frozen ? clock : ++clock) });
  await client.connect();
  const c0 = await server.connection(0);
  for (let i = 0; i < 10; i++) client.send({ event: 'typing', to: 'u', payload: { i } });
  assert.equal(client.queued, 8, 'a burst of 3 (the opening resume and two frames) goes out at once, the rest waits for tokens');
  frozen = false; // from now on every reading of the clock is 1 ms (one token) later
  const frames = await c0.sent(10);
  assert.deepEqual(frames.map((f) => f.payload.i), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
});

test('close: no reconnect, state closed, the socket closed with 1000', async (t) => {
  const { server, client, tickets } = await setup(t);
  const closes = collect(client, 'close');
  await client.connect();
  const c0 = await server.connection(0);
  client.close();
  assert.equal(client.state, 'closed');
  assert.equal(await c0.closed, 1000);
  assert.deepEqual(closes, [{ code: 1000, reason: 'client closed', reconnect: false }]);
  assert.equal(tickets(), 1);
});

test('options are checked', () => {
  assert.throws(() => new RealtimeClient({ url: 'http://x', WebSocket }), /getTicket/);
  assert.throws(() => new RealtimeClient({ getTicket: async () => 't', WebSocket }), /url/);
  const saved = globalThis.WebSocket;
  try {
    globalThis.WebSocket = undefined;
    assert.throws(() => new RealtimeClient({ url: 'http://x', getTicket: async () => 't' }), /WebSocket constructor/);
  } finally {
    globalThis.WebSocket = saved;
  }
});

test('on() returns an unsubscribe; EventTarget listeners get CustomEvents', async (t) => {
  const { client } = await setup(t);
  const seen = [];
  const off = client.on('state', (d) => seen.push(d.state));
  const viaTarget = [];
  client.addEventListener('state', (e) => viaTarget.push(e.detail.state));
  client.connect();
  off();
  await until(client, 'state', () => client.state === 'open');
  assert.deepEqual(seen, ['connecting']);
  assert.deepEqual(viaTarget, ['connecting', 'open']);
});

test('joining a room the client has a position in (not in a resume) sends a positioned room.join', async (t) => {
  const { server, client } = await setup(t, { streams: { 'room:x': { offset: 7, epoch: 'e2' } } });
  await client.connect();
  const c0 = await server.connection(0);
  client.join('x');
  const j = await c0.frame((f) => f.event === 'room.join');
  assert.deepEqual(j.payload, { offset: 7, epoch: 'e2' });
  assert.equal(c0.frames.some((f) => f.event === 'resume' && 'room:x' in f.payload.streams), false, 'a room stream is resumed only when the room is joined');
});

test('an error with code rate_limited pauses writing for retry_after_ms', async (t) => {
  let clock = 5_000_000;
  const { server, client } = await setup(t, { now: () => clock });
  await client.connect();
  const c0 = await server.connection(0);
  const errored = nextEvent(client, 'message', (m) => m.event === 'error');
  c0.send({ event: 'error', payload: { message: 'slow down', code: 'rate_limited', retry_after_ms: 30 } });
  await errored;
  client.send({ event: 'typing', to: 'u' });
  assert.equal(client.queued, 1, 'held while paused');
  clock += 30;
  await c0.sent(1);
  assert.equal(client.queued, 0);
});

test('a socket that does not open within connectTimeoutMs is abandoned and retried', async (t) => {
  const { createServer } = await import('node:net');
  const sockets = [];
  const silent = createServer((s) => sockets.push(s)); // accepts, never answers the upgrade
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
  let tickets = 0;
  const client = new RealtimeClient({
    url: `http://127.0.0.1:${silent.address().port}`, WebSocket, connectTimeoutMs: 20,
    getTicket: async () => `t${++tickets}`, backoff: { initialMs: 1, maxMs: 1 },
  });
  t.after(() => { client.close(); for (const s of sockets) s.destroy(); silent.close(); });
  const errors = collect(client, 'error');
  client.connect();
  await until(client, 'reconnecting', () => tickets >= 3);
  assert.equal(client.state === 'open', false);
  assert.equal(errors.length, 0);
});

test('without options.WebSocket the global WebSocket is used (browsers, Node 22)', async (t) => {
  const server = await fakeServer();
  const saved = globalThis.WebSocket;
  globalThis.WebSocket = WebSocket;
  let client;
  try {
    client = new RealtimeClient({ url: server.url, getTicket: async () => 'g1' });
  } finally {
    globalThis.WebSocket = saved;
  }
  t.after(async () => { client.close(); await server.close(); });
  await client.connect();
  assert.equal((await server.connection(0)).ticket, 'g1');
});
