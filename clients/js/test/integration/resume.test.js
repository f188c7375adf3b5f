// Resume of durable streams against a real two-replica Switchboard: the
// client's replica is killed while events are published on the other one;
// the client reconnects there, resumes, and ends with every event once, in
// order. Skipped (with the reason) when the server sends no offsets, i.e.
// does not have durable streams.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { RealtimeClient } from '../../src/index.js';
import { startCluster, missingPrerequisite } from '../support/cluster.js';
import { nextEvent, collect, until } from '../support/wait.js';

const missing = missingPrerequisite();
let cluster;
let unsupported = missing;
const clients = [];

before(async () => {
  if (missing) return;
  cluster = await startCluster({ replicas: 2 });
  unsupported = await resumeUnsupported();
  if (unsupported) console.log(`# resume tests skipped: ${unsupported}`);
}, { timeout: 120_000 });
after(async () => {
  for (const c of clients) c.close();
  await cluster?.stop();
});

function client(user, pin, opts = {}) {
  const c = new RealtimeClient({
    url: () => cluster.nodes[pin.i].url,
    WebSocket,
    getTicket: cluster.ticketFor(user),
    backoff: { initialMs: 20, maxMs: 200 },
    ...opts,
  });
  clients.push(c);
  return c;
}

// The server announces durable streams by the offset on stored events.
async function resumeUnsupported() {
  const probe = await cluster.register('probe');
  const c = client(probe, { i: 0 });
  await c.connect();
  const got = nextEvent(c, 'message', (m) => m.event === 'probe');
  const r = await cluster.api(cluster.nodes[0], 'POST', '/v1/events', { token: probe.token, body: { to: probe.id, event: 'probe', payload: {} } });
  if (r.status !== 202) throw new Error(`POST /v1/events: ${r.status} ${JSON.stringify(r.body)}`);
  const m = await got;
  c.close();
  if (!Number.isInteger(m.offset) || typeof m.stream !== 'string') {
    return 'this server sends no stream/offset on stored events (durable streams are not in this build)';
  }
  return false;
}

/** POSTs events one after the other on node (each acknowledged after its append). */
async function publish(node, sender, bodies) {
  for (const body of bodies) {
    const r = await cluster.api(node, 'POST', '/v1/events', { token: sender.token, body });
    assert.equal(r.status, 202, JSON.stringify(r.body));
  }
}

test('the replica holding the socket is killed mid-stream: resumed elsewhere, every event once, in order', async (t) => {
  if (unsupported) return t.skip(unsupported);
  t.after(() => cluster.nodes[0].start());
  const [alice, bob] = await Promise.all([cluster.register('alice'), cluster.register('bob')]);
  const pin = { i: 0 };
  const a = client(alice, pin);
  const msgs = collect(a, 'message');
  const resets = collect(a, 'reset');
  const gaps = collect(a, 'gap');
  const resumed = collect(a, 'resumed');
  const lobby = `room-${Math.random().toString(36).slice(2, 10)}`;
  await a.connect();
  await a.join(lobby);
  // Bob's events to Alice are stored in her inbox.
  const inboxStream = `inbox:${alice.id}`;
  const roomStream = `room:${lobby}`;

  const N = 240;
  const bodies = [];
  for (let n = 0; n < N; n++) {
    bodies.push(n % 2 === 0 ? { to: alice.id, event: 'note', payload: { n } } : { room: lobby, event: 'note', payload: { n } });
  }
  const node1 = cluster.nodes[1];
  await publish(node1, bob, bodies.slice(0, 60));
  await until(a, 'message', () => msgs.filter((m) => m.event === 'note').length >= 40);
  // Killed mid-stream; while its url still names the dead replica the client cannot
  // reconnect, so what is published meanwhile can only come with the resume.
  const closed = nextEvent(a, 'close');
  const during = publish(node1, bob, bodies.slice(60, 120));
  await cluster.nodes[0].stop('SIGKILL');
  assert.equal((await closed).reconnect, true);
  await during;
  assert.notEqual(a.state, 'open');
  pin.i = 1;
  await publish(node1, bob, bodies.slice(120)); // live, across the catch-up boundary
  const summary = () => JSON.stringify({
    inbox: msgs.filter((m) => m.stream === inboxStream).map((m) => m.offset),
    room: msgs.filter((m) => m.stream === roomStream).map((m) => m.offset),
    resets, gaps, resumed, state: a.state,
  });
  await until(a, 'message', () => msgs.filter((m) => m.event === 'note').length >= N, 30_000)
    .catch((err) => { throw new Error(`${err.message}; got ${summary()}`); });

  const notes = msgs.filter((m) => m.event === 'note');
  assert.equal(notes.length, N, 'nothing twice');
  for (const s of [inboxStream, roomStream]) {
    const got = notes.filter((m) => m.stream === s);
    assert.equal(got.length, N / 2, s);
    const first = got[0].offset;
    assert.deepEqual(got.map((m) => m.offset), got.map((_, i) => first + i), `${s}: consecutive offsets`);
    assert.deepEqual(got.map((m) => m.payload.n), bodies.map((b, n) => ((s === inboxStream) === (b.to !== undefined) ? n : -1)).filter((n) => n >= 0), `${s}: publish order`);
  }
  assert.deepEqual(resets, []);
  assert.deepEqual(gaps, []);
  await until(a, 'resumed', () => resumed.length >= 1); // after the catch-up, maybe after live events
  const last = resumed.at(-1).streams;
  assert.equal(last[inboxStream]?.recovered, true, JSON.stringify(resumed));
  assert.equal(last[roomStream]?.recovered, true, JSON.stringify(resumed));
  assert.equal(a.streams()[inboxStream].recovered, true);
  assert.equal(a.streams()[roomStream].recovered, true);
});

test('a position in another epoch is not recovered: reset, then live events', async (t) => {
  if (unsupported) return t.skip(unsupported);
  const erin = await cluster.register('erin');
  const userStream = `user:${erin.id}`;
  const e = client(erin, { i: 1 }, { streams: { [userStream]: { offset: 3, epoch: 'not-an-epoch' } } });
  const msgs = collect(e, 'message');
  const reset = nextEvent(e, 'reset');
  await e.connect();
  const r = await reset;
  assert.equal(r.stream, userStream);
  assert.equal(r.reason, 'not_recovered');
  assert.deepEqual(r.previous, { epoch: 'not-an-epoch', offset: 3 });
  assert.equal(e.streams()[userStream].recovered, false);
  await publish(cluster.nodes[0], erin, [{ to: erin.id, event: 'note', payload: { n: 1 } }]); // to herself: her user stream
  await until(e, 'message', () => msgs.some((m) => m.event === 'note'));
  assert.equal(e.streams()[userStream].epoch, msgs.find((m) => m.event === 'note').epoch);
});

test('DMs from another user arrive in the inbox stream, and those sent while the recipient is away come with its resume', async (t) => {
  if (unsupported) return t.skip(unsupported);
  const [fay, gus] = await Promise.all([cluster.register('fay'), cluster.register('gus')]);
  const f = client(fay, { i: 0 });
  const g = client(gus, { i: 1 });
  const fMsgs = collect(f, 'message');
  await Promise.all([f.connect(), g.connect()]);
  g.send({ event: 'dm', to: fay.id, payload: { n: 0 } });
  const inbox = `inbox:${fay.id}`;
  await until(f, 'message', () => fMsgs.some((m) => m.event === 'dm'));
  const dm = fMsgs.find((m) => m.event === 'dm');
  assert.deepEqual([dm.stream, dm.offset, dm.from, dm.to], [inbox, 1, gus.id, fay.id]);
  assert.equal(f.streams()[`user:${fay.id}`]?.offset, 0, 'nothing in her own stream');

  // Fay's socket drops; DMs sent meanwhile come with the resume.
  f.close();
  const f2 = client(fay, { i: 1 }, { streams: f.streams() });
  const f2Msgs = collect(f2, 'message');
  for (let n = 1; n <= 5; n++) g.send({ event: 'dm', to: fay.id, payload: { n } });
  await until(g, 'state', () => g.queued === 0);
  const resumed = nextEvent(f2, 'resumed'); // it follows the missed events
  await f2.connect();
  await resumed;
  await until(f2, 'message', () => f2Msgs.filter((m) => m.event === 'dm').length >= 5, 15_000);
  const dms = f2Msgs.filter((m) => m.event === 'dm');
  assert.deepEqual(dms.map((m) => m.payload.n), [1, 2, 3, 4, 5]);
  assert.deepEqual(dms.map((m) => `${m.stream}#${m.offset}`), [2, 3, 4, 5, 6].map((o) => `${inbox}#${o}`));
  assert.equal(f2.streams()[inbox].recovered, true);
});

test('a socket that saw no event yet still resumes its inbox: DMs sent while it was away arrive', async (t) => {
  if (unsupported) return t.skip(unsupported);
  const [kim, lou] = await Promise.all([cluster.register('kim'), cluster.register('lou')]);
  const k = client(kim, { i: 0 });
  const resumed = nextEvent(k, 'resumed'); // the answer to the opening resume names every stream
  await k.connect();
  await resumed;
  const inbox = `inbox:${kim.id}`;
  assert.deepEqual(k.streams()[inbox], { epoch: '', offset: 0, recovered: true });
  k.close();
  await publish(cluster.nodes[1], lou, [1, 2].map((n) => ({ to: kim.id, event: 'dm', payload: { n } })));
  const k2 = client(kim, { i: 1 }, { streams: k.streams() });
  const got = collect(k2, 'message');
  await k2.connect();
  await until(k2, 'message', () => got.filter((m) => m.event === 'dm').length >= 2, 15_000);
  assert.deepEqual(got.filter((m) => m.event === 'dm').map((m) => `${m.stream}#${m.offset}`), [`${inbox}#1`, `${inbox}#2`]);
});

test('a resume of rooms holding many read budgets gets every event once, in order, then resumed', async (t) => {
  if (unsupported) return t.skip(unsupported);
  const [hal, ivy] = await Promise.all([cluster.register('hal'), cluster.register('ivy')]);
  const rooms = [1, 2].map(() => `big-${Math.random().toString(36).slice(2, 10)}`);
  const h = client(hal, { i: 0 });
  const first = collect(h, 'message');
  await h.connect();
  for (const room of rooms) await h.join(room);
  await publish(cluster.nodes[1], ivy, rooms.map((room) => ({ room, event: 'big', payload: { n: 0 } })));
  await until(h, 'message', () => first.filter((m) => m.event === 'big').length >= rooms.length);
  h.close();

  // 2 × 12 × 30 KB: about eleven of the cluster's 64 KiB read budgets.
  const N = 12;
  const pad = 'x'.repeat(30_000);
  const bodies = [];
  for (let n = 1; n <= N; n++) for (const room of rooms) bodies.push({ room, event: 'big', payload: { n, pad } });
  await publish(cluster.nodes[1], ivy, bodies);
  const h2 = client(hal, { i: 1 }, { streams: h.streams() });
  const got = collect(h2, 'message');
  const resumed = nextEvent(h2, 'resumed');
  for (const room of rooms) h2.join(room);
  await h2.connect();
  const r = await resumed;
  for (const room of rooms) {
    const s = `room:${room}`;
    const mine = got.filter((m) => m.stream === s);
    assert.deepEqual(mine.map((m) => m.payload.n), Array.from({ length: N }, (_, i) => i + 1), `${s}: every event once, in order`);
    assert.deepEqual(mine.map((m) => m.offset), mine.map((_, i) => 2 + i), `${s}: consecutive offsets`);
    assert.equal(r.streams[s]?.recovered, true, JSON.stringify(r));
    assert.equal(r.streams[s]?.offset, N + 1, JSON.stringify(r));
  }
});
