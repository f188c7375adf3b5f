// Presence with RealtimeClient against three real replicas (OS processes, one
// PostgreSQL): presence events and presence(room) agree across replicas, a
// user with clients on two replicas is one member, a late joiner starts from
// the GET /v1/presence snapshot, and the users of a killed replica leave.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { RealtimeClient } from '../../src/index.js';
import { startCluster, missingPrerequisite } from '../support/cluster.js';
import { collect, until } from '../support/wait.js';

const skip = missingPrerequisite() ?? false;
let cluster;
before(async () => { if (!skip) cluster = await startCluster({ replicas: 3 }); }, { timeout: 120_000 });
after(async () => { await cluster?.stop(); });

const clients = [];
after(() => { for (const c of clients) c.close(); });

/** A client of user on replica i whose getPresence asks that replica. */
function client(user, i) {
  const node = () => cluster.nodes[i];
  const c = new RealtimeClient({
    url: () => node().url,
    WebSocket,
    getTicket: cluster.ticketFor(user),
    getPresence: async (room) => {
      const r = await cluster.api(node(), 'GET', `/v1/presence?room=${encodeURIComponent(room)}`, { token: user.token });
      if (r.status !== 200) throw Object.assign(new Error(`presence: ${r.status}`), { status: r.status });
      return r.body;
    },
    backoff: { initialMs: 20, maxMs: 200 },
  });
  clients.push(c);
  return c;
}

/** Waits until GET /v1/presence counts n connections of user in room. */
async function connections(room, user, n, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await cluster.api(cluster.nodes[0], 'GET', `/v1/presence?room=${encodeURIComponent(room)}`, { token: user.token });
    if (r.body?.users?.find((u) => u.user_id === user.id)?.connections === n) return;
    if (Date.now() > deadline) throw new Error(`${user.email} never had ${n} connection(s) in ${room}: ${JSON.stringify(r.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // polling interval, not an assertion
  }
}

const room = () => `presence-${Math.random().toString(36).slice(2, 10)}`;
const sorted = (...ids) => [...ids].sort();
const changes = (events, userId, joined) => events.filter((e) => e.userId === userId && e.joined === joined).length;

test('joins and leaves across three replicas: one member per user, presence(room) agrees everywhere', { skip, timeout: 60_000 }, async () => {
  const [watcher, alice, bob, carol] = await Promise.all(['watcher', 'alice', 'bob', 'carol'].map((n) => cluster.register(n)));
  const lobby = room();
  const w = client(watcher, 0);
  const seen = collect(w, 'presence');
  await w.connect();
  await w.join(lobby);
  await until(w, 'presence', () => w.presence(lobby)?.includes(watcher.id));

  const a1 = client(alice, 1);
  const a2 = client(alice, 2);
  const b = client(bob, 2);
  await Promise.all([a1, a2, b].map((c) => c.connect()));
  await Promise.all([a1, a2, b].map((c) => c.join(lobby)));
  const all = sorted(watcher.id, alice.id, bob.id);
  await until(w, 'presence', () => JSON.stringify(w.presence(lobby)) === JSON.stringify(all));

  // A late joiner on another replica starts from the snapshot.
  const c = client(carol, 1);
  await c.connect();
  await c.join(lobby);
  await until(c, 'presence', () => JSON.stringify(c.presence(lobby)) === JSON.stringify(sorted(...all, carol.id)));
  await until(w, 'presence', () => w.presence(lobby).includes(carol.id));

  a1.close();
  await connections(lobby, alice, 1); // alice is still present through her other client
  assert.ok(w.presence(lobby).includes(alice.id));
  a2.close();
  b.leave(lobby);
  await until(w, 'presence', () => JSON.stringify(w.presence(lobby)) === JSON.stringify(sorted(watcher.id, carol.id)));
  await until(c, 'presence', () => JSON.stringify(c.presence(lobby)) === JSON.stringify(sorted(watcher.id, carol.id)));
  for (const [id, name] of [[alice.id, 'alice'], [bob.id, 'bob']]) {
    assert.equal(changes(seen, id, true), 1, `one join of ${name}`);
    assert.equal(changes(seen, id, false), 1, `one leave of ${name}`);
  }
  const r = await cluster.api(cluster.nodes[2], 'GET', `/v1/presence?room=${lobby}`, { token: carol.token });
  assert.deepEqual(r.body.users.map((u) => u.user_id).sort(), sorted(watcher.id, carol.id));
});

test('kill -9 of a replica: its users leave once it is judged dead, except one who reconnected elsewhere', { skip, timeout: 60_000 }, async () => {
  const [watcher, dora, eve] = await Promise.all(['watcher', 'dora', 'eve'].map((n) => cluster.register(n)));
  const lobby = room();
  const w = client(watcher, 0);
  const seen = collect(w, 'presence');
  await w.connect();
  await w.join(lobby);
  const pin = { i: 2 };
  const d = client(dora, 2);
  const doraMoving = new RealtimeClient({ url: () => cluster.nodes[pin.i].url, WebSocket, getTicket: cluster.ticketFor(dora), backoff: { initialMs: 20, maxMs: 200 } });
  clients.push(doraMoving);
  d.close(); // dora's only client is the one that moves
  const e = client(eve, 2);
  await Promise.all([doraMoving.connect(), e.connect()]);
  await Promise.all([doraMoving.join(lobby), e.join(lobby)]);
  await until(w, 'presence', () => ['dora', 'eve'].every((n) => w.presence(lobby)?.includes(n === 'dora' ? dora.id : eve.id)));

  pin.i = 1; // dora's next socket goes to replica 1
  await cluster.nodes[2].stop('SIGKILL');
  const killed = Date.now();
  await until(doraMoving, 'message', () => doraMoving.state === 'open' && doraMoving.rooms.includes(lobby), 10_000);
  await until(w, 'presence', () => !w.presence(lobby).includes(eve.id), 20_000);
  const leftAfter = Date.now() - killed;
  assert.equal(changes(seen, eve.id, false), 1, 'one leave of eve');
  assert.equal(changes(seen, dora.id, false), 0, 'no leave of dora, who reconnected elsewhere');
  assert.equal(changes(seen, dora.id, true), 1, 'and no second join');
  assert.deepEqual(w.presence(lobby), sorted(watcher.id, dora.id));
  console.log(`# eve's leave arrived ${leftAfter} ms after kill -9 (the node expiry is 10 s)`);
});
