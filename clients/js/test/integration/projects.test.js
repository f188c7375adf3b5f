// Project run-event streams against a real two-replica Switchboard (OS processes, one
// PostgreSQL): a member receives the project's run events on project:<id>; removed by
// the owner, its client gets project.removed, forgets the stream, does not resume it on
// its next socket, and receives nothing of the project afterwards.
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

/** A project of owner with member added through an invite; returns its id. */
async function sharedProject(owner, member, role) {
  const api = (node, method, route, token, body) => cluster.api(cluster.nodes[node], method, route, { token, body });
  const p = await api(0, 'POST', '/v1/projects', owner.token, { name: 'team' });
  assert.equal(p.status, 201, JSON.stringify(p.body));
  const inv = await api(1, 'POST', `/v1/projects/${p.body.id}/invites`, owner.token, { email: member.email, role });
  assert.equal(inv.status, 201, JSON.stringify(inv.body));
  const acc = await api(0, 'POST', '/v1/invites/accept', member.token, { token: inv.body.token });
  assert.equal(acc.status, 200, JSON.stringify(acc.body));
  return p.body.id;
}

const finished = (run) => (f) => f.event === 'task.run.succeeded' && f.payload?.id === run;

test('a removed member gets project.removed and nothing of the project after it', { skip }, async (t) => {
  t.after(() => cluster.nodes[0].start());
  const [owner, member] = await Promise.all([cluster.register('owner'), cluster.register('member')]);
  const project = await sharedProject(owner, member, 'viewer');
  const stream = `project:${project}`;
  const inProject = { 'X-Switchboard-Project': project };
  const api = (node, method, route, body) => cluster.api(cluster.nodes[node], method, route, { token: owner.token, body, headers: inProject });
  const task = await api(1, 'POST', '/v1/tasks', { name: 'shared', action: { type: 'publish', event: 'ping' } });
  assert.equal(task.status, 201, JSON.stringify(task.body));
  const trigger = async () => {
    const r = await api(1, 'POST', `/v1/tasks/${task.body.id}/runs`, {});
    assert.equal(r.status, 202, JSON.stringify(r.body));
    return r.body.id;
  };

  const pin = { i: 0 };
  const m = client(member, pin);
  const o = client(owner, { i: 1 });
  const msgs = collect(m, 'message');
  const ownerMsgs = collect(o, 'message');
  const removals = collect(m, 'project.removed');
  await Promise.all([m.connect(), o.connect()]);

  const first = await trigger();
  await until(m, 'message', () => msgs.some(finished(first)), 20_000);
  assert.ok(msgs.filter((f) => f.payload?.id === first).every((f) => f.stream === stream), 'run events arrive on the project stream');
  assert.ok(m.streams()[stream]?.offset > 0);

  const removed = nextEvent(m, 'project.removed');
  assert.equal((await api(1, 'DELETE', `/v1/projects/${project}/members/${member.id}`)).status, 204);
  assert.deepEqual(await removed, { project, reason: 'removed' });
  assert.equal(m.streams()[stream], undefined, 'the position is forgotten');
  const seen = msgs.length;

  // A run after the removal: the owner (on the other replica) sees it finish; a marker in
  // the member's inbox, sent after that, comes before anything of the run could.
  const second = await trigger();
  await until(o, 'message', () => ownerMsgs.some(finished(second)), 20_000);
  const marker = await cluster.api(cluster.nodes[1], 'POST', '/v1/events', { token: owner.token, body: { to: member.id, event: 'marker' } });
  assert.equal(marker.status, 202);
  await until(m, 'message', () => msgs.some((f) => f.event === 'marker'));
  assert.deepEqual(msgs.slice(seen).map((f) => f.event), ['marker']);

  // A new socket (the replica stops): the resume does not name the project, so the server
  // has no project.removed to answer and its resumed frame does not list the stream.
  const resumed = nextEvent(m, 'resumed', () => true, 20_000);
  pin.i = 1;
  await cluster.nodes[0].stop('SIGTERM');
  const r = await resumed;
  assert.equal(r.streams[stream], undefined);
  assert.ok(r.streams[`inbox:${member.id}`], 'the inbox is resumed');
  assert.equal(removals.length, 1);
});
