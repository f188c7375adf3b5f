// Members-only rooms against a real two-replica Switchboard (OS processes, one
// PostgreSQL): a removed member's client gets room.removed, forgets the room and
// does not rejoin it on its next socket.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { RealtimeClient } from '../../src/index.js';
import { startCluster, missingPrerequisite } from '../support/cluster.js';
import { nextEvent, collect, until } from '../support/wait.js';

const skip = missingPrerequisite() ?? false;
let cluster;
before(async () => { if (!skip) cluster = await startCluster({ replicas: 2 }); }, { timeout: 120_000 });
after(async () => { await cluster?.stop(); });

const clients = [];
after(() => { for (const c of clients) c.close(); });

function client(user, pin) {
  const c = new RealtimeClient({
    url: () => cluster.nodes[pin.i].url,
    WebSocket,
    getTicket: cluster.ticketFor(user),
    backoff: { initialMs: 20, maxMs: 200 },
  });
  clients.push(c);
  return c;
}

const name = (p) => `${p}-${Math.random().toString(36).slice(2, 10)}`;

test('a removed member gets room.removed, and its next socket does not rejoin the room', { skip }, async (t) => {
  t.after(() => cluster.nodes[0].start());
  const [owner, member] = await Promise.all([cluster.register('owner'), cluster.register('member')]);
  const vault = name('vault');
  const lobby = name('lobby');
  const api = (node, method, route, body) => cluster.api(cluster.nodes[node], method, route, { token: owner.token, body });
  assert.equal((await api(0, 'POST', '/v1/rooms', { name: vault, visibility: 'members' })).status, 201);
  assert.equal((await api(1, 'PUT', `/v1/rooms/${vault}/members/${member.id}`)).status, 200);

  const pin = { i: 0 };
  const m = client(member, pin);
  const msgs = collect(m, 'message');
  await m.connect();
  await Promise.all([m.join(vault), m.join(lobby)]);
  assert.equal((await api(1, 'POST', '/v1/events', { room: vault, event: 'before' })).status, 202);
  await until(m, 'message', () => msgs.some((f) => f.event === 'before'));

  const removed = nextEvent(m, 'room.removed');
  assert.equal((await api(1, 'DELETE', `/v1/rooms/${vault}/members/${member.id}`)).status, 204);
  assert.deepEqual(await removed, { room: vault, reason: 'removed' });
  assert.deepEqual(m.rooms, [lobby]);

  // A new socket (the replica stops): the client rejoins the lobby only. Even after the
  // member is added back, nothing of the vault reaches it before a lobby marker.
  const reopened = nextEvent(m, 'open', (d) => d.attempt > 1, 20_000);
  pin.i = 1;
  await cluster.nodes[0].stop('SIGTERM');
  await reopened;
  await until(m, 'message', () => msgs.filter((f) => f.event === 'room.joined' && f.room === lobby).length === 2);
  assert.equal((await api(1, 'PUT', `/v1/rooms/${vault}/members/${member.id}`)).status, 200);
  const seen = msgs.length;
  assert.equal((await api(1, 'POST', '/v1/events', { room: vault, event: 'after' })).status, 202);
  assert.equal((await api(1, 'POST', '/v1/events', { room: lobby, event: 'marker' })).status, 202);
  await until(m, 'message', () => msgs.some((f) => f.event === 'marker'));
  // Presence frames (the member's own lobby presence after the new socket) are not room content.
  assert.deepEqual(msgs.slice(seen).map((f) => f.event).filter((e) => !e.startsWith('presence.')), ['marker']);
  assert.ok(!msgs.some((f) => f.event === 'room.joined' && f.room === vault && msgs.indexOf(f) > msgs.findIndex((g) => g.event === 'before')),
    'the vault was not rejoined');
  assert.deepEqual(m.rooms, [lobby]);
});

test('joining a members-only room without being a member is refused', { skip }, async () => {
  const [owner, outsider] = await Promise.all([cluster.register('owner'), cluster.register('outsider')]);
  const vault = name('vault');
  assert.equal((await cluster.api(cluster.nodes[1], 'POST', '/v1/rooms', { token: owner.token, body: { name: vault, visibility: 'members' } })).status, 201);
  const o = client(outsider, { i: 1 });
  await o.connect();
  await assert.rejects(o.join(vault), /members only/);
  assert.deepEqual(o.rooms, []);
});
