// The typed REST client against a real Switchboard replica, end to end:
// register → API key → on-demand publish task (made with the key) → realtime
// client connected with a ticket the REST client fetched → trigger → runs →
// the task.run.* events and the published event arrive over the socket.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { RealtimeClient, createRestClient, ProblemError } from '../../src/index.js';
import { startCluster, missingPrerequisite } from '../support/cluster.js';
import { collect, until } from '../support/wait.js';

const skip = missingPrerequisite() ?? false;
let cluster;
let rt;
before(async () => { if (!skip) cluster = await startCluster({ replicas: 1 }); }, { timeout: 120_000 });
after(async () => {
  rt?.close();
  await cluster?.stop();
});

test('register, API key, task, realtime ticket, trigger, runs and events', { skip }, async () => {
  const baseUrl = cluster.nodes[0].url;
  const anon = createRestClient({ baseUrl });
  const email = `rest-${Math.random().toString(36).slice(2, 10)}@example.com`;
  const reg = await anon.POST('/v1/auth/register', { body: { email, password: 'password-123' } });
  assert.equal(reg.user.email, email);

  const session = createRestClient({ baseUrl, token: reg.token });
  const key = await session.POST('/v1/api-keys', { body: { name: 'rest-test' } });
  assert.match(key.secret, /^sbk_/);
  const listed = await session.GET('/v1/api-keys');
  assert.deepEqual(listed.items.map((k) => k.id), [key.id]);

  const api = createRestClient({ baseUrl, apiKey: key.secret });
  const me = await api.GET('/v1/me');
  assert.equal(me.id, reg.user.id);
  const keysByKey = await api.POST('/v1/api-keys', { body: { name: 'nested' } }).catch((e) => e);
  assert.ok(keysByKey instanceof ProblemError, 'an API key cannot make keys');
  assert.equal(keysByKey.status, 403);

  const task = await api.POST('/v1/tasks', {
    body: { name: 'rest-publish', schedule: null, action: { type: 'publish', event: 'rest.hello', payload: { from: 'task' } } },
  });
  assert.equal(task.schedule, null);
  assert.equal(task.next_run_at, null);
  const bad = await api.POST('/v1/tasks', { body: { name: 'bad', schedule: 'not a cron', action: { type: 'publish', event: 'x' } } }).catch((e) => e);
  assert.equal(bad.status, 422);
  assert.ok(bad.detail || bad.errors.length, 'the problem explains itself');

  rt = new RealtimeClient({
    url: baseUrl,
    WebSocket,
    getTicket: async () => (await api.POST('/v1/ws/ticket')).ticket,
    backoff: { initialMs: 20, maxMs: 200 },
  });
  const frames = collect(rt, 'message');
  await rt.connect();

  const run = await api.POST('/v1/tasks/{id}/runs', {
    params: { path: { id: task.id }, header: { 'Idempotency-Key': 'trigger-1' } },
    body: { payload: { from: 'trigger' } },
  });
  assert.equal(run.trigger, 'manual');
  assert.equal(run.task_id, task.id);

  const runEvent = (status) => frames.find((f) => f.event === `task.run.${status}` && f.payload?.id === run.id);
  await until(rt, 'message', () => runEvent('succeeded') && frames.some((f) => f.event === 'rest.hello'), 30_000);
  assert.ok(runEvent('running'), 'task.run.running arrives too');
  const published = frames.find((f) => f.event === 'rest.hello');
  assert.deepEqual(published.payload, { from: 'trigger' }, 'the trigger payload replaces the task payload for this run');

  const runs = await api.GET('/v1/tasks/{id}/runs', { params: { path: { id: task.id }, query: { limit: 10 } } });
  assert.deepEqual(runs.items.map((r) => r.id), [run.id]);
  assert.equal(runs.items[0].status, 'succeeded');
  const again = await api.GET('/v1/runs/{id}', { params: { path: { id: run.id } } });
  assert.equal(again.status, 'succeeded');

  const missing = await api.GET('/v1/tasks/{id}', { params: { path: { id: '00000000-0000-0000-0000-000000000000' } } }).catch((e) => e);
  assert.equal(missing.status, 404);
});
