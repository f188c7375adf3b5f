// RealtimeClient against a real two-replica Switchboard (OS processes, one
// PostgreSQL): tickets, rooms and DMs across replicas, reconnects after the
// server closes or dies, operator disconnects and rate-limit closes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { RealtimeClient, CloseCodes } from '../../src/index.js';
import { startCluster, missingPrerequisite } from '../support/cluster.js';
import { nextEvent, collect, until } from '../support/wait.js';

const skip = missingPrerequisite() ?? false;
let cluster;
before(async () => { if (!skip) cluster = await startCluster({ replicas: 2 }); }, { timeout: 120_000 });
after(async () => { await cluster?.stop(); });

const clients = [];
after(() => { for (const c of clients) c.close(); });

/** A client pinned to replica i (url() is asked on every attempt; `pin.i` may change). */
function client(user, pin, opts = {}) {
  const c = new RealtimeClient({
    url: () => cluster.nodes[pin.i].url,
    WebSocket,
    getTicket: cluster.ticketFor(user, opts),
    backoff: { initialMs: 20, maxMs: 200 },
    ...opts,
  });
  clients.push(c);
  return c;
}

const room = () => `room-${Math.random().toString(36).slice(2, 10)}`;

test('ticket, connect, rooms and DMs across two replicas', { skip }, async () => {
  const [alice, bob] = await Promise.all([cluster.register('alice'), cluster.register('bob')]);
  const a = client(alice, { i: 0 });
  const b = client(bob, { i: 1 });
  const aMsgs = collect(a, 'message');
  const bMsgs = collect(b, 'message');
  await Promise.all([a.connect(), b.connect()]);
  const lobby = room();
  await Promise.all([a.join(lobby), b.join(lobby)]);

  b.send({ event: 'room.message', room: lobby, payload: { text: 'hello from replica1' } });
  b.send({ event: 'dm', to: alice.id, payload: { text: 'psst' } });
  const r = await cluster.api(cluster.nodes[1], 'POST', '/v1/events', { token: bob.token, body: { to: alice.id, event: 'note', payload: { n: 1 } } });
  assert.equal(r.status, 202);

  await until(a, 'message', () => ['room.message', 'dm', 'note'].every((e) => aMsgs.some((m) => m.event === e)));
  const rm = aMsgs.find((m) => m.event === 'room.message');
  assert.equal(rm.room, lobby);
  assert.equal(rm.from, bob.id);
  assert.deepEqual(rm.payload, { text: 'hello from replica1' });
  const dm = aMsgs.find((m) => m.event === 'dm');
  assert.equal(dm.from, bob.id);
  assert.deepEqual(dm.payload, { text: 'psst' });
  assert.deepEqual(aMsgs.find((m) => m.event === 'note').payload, { n: 1 });
  await until(b, 'message', () => bMsgs.some((m) => m.event === 'room.message'));
  assert.equal(bMsgs.filter((m) => m.event === 'room.message').length, 1, 'the sender gets its room message once');
  assert.equal(aMsgs.filter((m) => m.event === 'room.message').length, 1);
});

test('the replica shuts down (server.draining, 1001): the client reconnects to the other, rejoins, sends what was queued', { skip }, async (t) => {
  t.after(() => cluster.nodes[0].start());
  const [alice, bob] = await Promise.all([cluster.register('alice'), cluster.register('bob')]);
  const pin = { i: 0 };
  const count = { n: 0 };
  const a = client(alice, pin, { count });
  const b = client(bob, { i: 1 });
  const aMsgs = collect(a, 'message');
  const bMsgs = collect(b, 'message');
  const lobby = room();
  await Promise.all([a.connect(), b.connect()]);
  await Promise.all([a.join(lobby), b.join(lobby)]);

  // At the close the client is disconnected: what it sends then waits in the queue and goes
  // out after the rejoin on the next socket.
  let atClose;
  const off = a.on('close', () => {
    off();
    a.send({ event: 'room.message', room: lobby, payload: { text: 'queued while away' } });
    atClose = { state: a.state, queued: a.queued };
  });
  const closed = nextEvent(a, 'close');
  pin.i = 1;
  await cluster.nodes[0].stop('SIGTERM');
  const c = await closed;
  assert.equal(c.code, CloseCodes.GOING_AWAY);
  assert.equal(c.reconnect, true);
  assert.deepEqual(atClose, { state: 'reconnecting', queued: 1 });
  assert.ok(aMsgs.some((m) => m.event === 'server.draining'), 'server.draining came before the close');

  await until(b, 'message', () => bMsgs.some((m) => m.payload?.text === 'queued while away'));
  assert.equal(a.state, 'open');
  assert.equal(count.n, 2, 'a fresh ticket for the new socket');
  b.send({ event: 'room.message', room: lobby, payload: { text: 'welcome back' } });
  await until(a, 'message', () => aMsgs.some((m) => m.payload?.text === 'welcome back'));
});

test('the replica is killed (SIGKILL): the client reconnects to the other one and keeps its rooms', { skip }, async (t) => {
  t.after(() => cluster.nodes[0].start());
  const [alice, bob] = await Promise.all([cluster.register('alice'), cluster.register('bob')]);
  const pin = { i: 0 };
  const a = client(alice, pin);
  const b = client(bob, { i: 1 });
  const aMsgs = collect(a, 'message');
  const lobby = room();
  await Promise.all([a.connect(), b.connect()]);
  await Promise.all([a.join(lobby), b.join(lobby)]);

  const joins = () => aMsgs.filter((m) => m.event === 'room.joined' && m.room === lobby).length;
  assert.equal(joins(), 1);
  const reconnects = collect(a, 'reconnecting');
  const closed = nextEvent(a, 'close');
  await cluster.nodes[0].stop('SIGKILL');
  assert.equal((await closed).reconnect, true);
  // The next attempt goes to the dead replica and fails; it is retried, and then the other one answers.
  await until(a, 'reconnecting', () => reconnects.length >= 2);
  pin.i = 1;
  await until(a, 'message', () => joins() === 2);
  assert.equal(a.state, 'open');
  b.send({ event: 'room.message', room: lobby, payload: { text: 'after the kill' } });
  b.send({ event: 'dm', to: alice.id, payload: { text: 'dm after the kill' } });
  await until(a, 'message', () => aMsgs.some((m) => m.payload?.text === 'after the kill') && aMsgs.some((m) => m.payload?.text === 'dm after the kill'));
});

test('an operator disconnect (4001) ends the client: no reconnect', { skip }, async () => {
  const [admin, carol] = await Promise.all([cluster.register('admin'), cluster.register('carol')]);
  await cluster.grantAdmin(admin);
  const count = { n: 0 };
  const c = client(carol, { i: 0 }, { count });
  await c.connect();
  const closed = nextEvent(c, 'close');
  const r = await cluster.api(cluster.nodes[1], 'POST', `/v1/admin/users/${carol.id}/disconnect`, { token: admin.token });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const ev = await closed;
  assert.equal(ev.code, CloseCodes.DISCONNECTED_BY_OPERATOR);
  assert.equal(ev.reconnect, false);
  assert.equal(c.state, 'closed');
  assert.equal(count.n, 1);
});

test('a rate-limit close (4029) reconnects after the longer backoff', { skip }, async () => {
  const dave = await cluster.register('dave');
  // Pacing off, so the client floods the server past its limits and strikes.
  const d = client(dave, { i: 1 }, {
    sendRate: 1e6, sendBurst: 1e6,
    rateLimitedBackoff: { initialMs: 300, maxMs: 600, floor: 0.5 },
  });
  await d.connect();
  const closed = nextEvent(d, 'close');
  const reconnecting = nextEvent(d, 'reconnecting');
  for (let i = 0; i < 150; i++) d.send({ event: 'typing', to: dave.id });
  const ev = await closed;
  assert.equal(ev.code, CloseCodes.RATE_LIMITED);
  const r = await reconnecting;
  assert.ok(r.delayMs >= 150 && r.delayMs <= 300, `delay ${r.delayMs} from the rate-limited policy`);
  await until(d, 'state', () => d.state === 'open');
});

test('DMs to oneself arrive in order; with durable streams their offsets are consecutive, without them nothing is tracked', { skip }, async () => {
  const erin = await cluster.register('erin');
  const e = client(erin, { i: 0 });
  const msgs = collect(e, 'message');
  await e.connect();
  for (let n = 0; n < 5; n++) e.send({ event: 'dm', to: erin.id, payload: { n } });
  await until(e, 'message', () => msgs.filter((m) => m.event === 'dm').length === 5);
  const dms = msgs.filter((m) => m.event === 'dm');
  assert.deepEqual(dms.map((m) => m.payload.n), [0, 1, 2, 3, 4]);
  if (dms.every((m) => m.offset === undefined)) {
    assert.deepEqual(e.streams(), {});
  } else {
    assert.deepEqual(dms.map((m) => m.offset - dms[0].offset), [0, 1, 2, 3, 4], 'offsets are consecutive');
  }
});
