// createRestClient against a recording fetch: URL building, credentials,
// bodies, and problem answers turned into ProblemError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRestClient, ProblemError } from '../../src/index.js';

function recorder(answer) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, ...init });
    const { status = 200, body, type = 'application/json' } = answer(url, init);
    return new Response(body === undefined ? null : JSON.stringify(body), { status, headers: { 'content-type': type } });
  };
  return { calls, fetch };
}

test('fills path parameters, query and credentials; sends JSON bodies', async () => {
  const r = recorder(() => ({ status: 202, body: { id: 'run1' } }));
  const api = createRestClient({ baseUrl: 'http://sb.test/', apiKey: 'sbk_k', fetch: r.fetch });
  const run = await api.POST('/v1/tasks/{id}/runs', {
    params: { path: { id: 'a/b c' }, header: { 'Idempotency-Key': 'k1' } },
    body: { payload: { n: 1 } },
  });
  assert.deepEqual(run, { id: 'run1' });
  const [c] = r.calls;
  assert.equal(c.url, 'http://sb.test/v1/tasks/a%2Fb%20c/runs');
  assert.equal(c.method, 'POST');
  assert.equal(c.headers.authorization, 'Bearer sbk_k');
  assert.equal(c.headers['Idempotency-Key'], 'k1');
  assert.equal(c.headers['content-type'], 'application/json');
  assert.equal(c.body, '{"payload":{"n":1}}');

  await api.GET('/v1/tasks', { params: { query: { kind: 'on_demand', limit: 5, cursor: undefined } } });
  assert.equal(r.calls[1].url, 'http://sb.test/v1/tasks?kind=on_demand&limit=5');
  assert.equal(r.calls[1].body, undefined);
  assert.equal(r.calls[1].headers['content-type'], undefined);
});

test('token may be a function, read on every request; no credential sends no header', async () => {
  const r = recorder(() => ({ status: 204 }));
  let tok = 't1';
  const api = createRestClient({ baseUrl: 'http://sb.test', token: () => tok, fetch: r.fetch });
  assert.equal(await api.DELETE('/v1/tasks/{id}', { params: { path: { id: 'x' } } }), undefined);
  tok = 't2';
  await api.DELETE('/v1/tasks/{id}', { params: { path: { id: 'x' } } });
  assert.deepEqual(r.calls.map((c) => c.headers.authorization), ['Bearer t1', 'Bearer t2']);
  const anon = createRestClient({ baseUrl: 'http://sb.test', fetch: r.fetch });
  await anon.GET('/healthz/live');
  assert.equal(r.calls[2].headers.authorization, undefined);
});

test('a problem answer rejects with ProblemError carrying status, title, detail, errors', async () => {
  const problem = { status: 422, title: 'Unprocessable Entity', detail: 'validation failed', errors: [{ location: 'body.schedule', message: 'bad cron' }] };
  const r = recorder(() => ({ status: 422, body: problem, type: 'application/problem+json' }));
  const api = createRestClient({ baseUrl: 'http://sb.test', token: 't', fetch: r.fetch });
  const err = await api.POST('/v1/tasks', { body: { name: 'x' } }).catch((e) => e);
  assert.ok(err instanceof ProblemError);
  assert.equal(err.status, 422);
  assert.equal(err.title, 'Unprocessable Entity');
  assert.equal(err.detail, 'validation failed');
  assert.deepEqual(err.errors, problem.errors);
  assert.match(err.message, /POST \/v1\/tasks: 422 Unprocessable Entity: validation failed/);

  const plain = recorder(() => ({ status: 502, body: undefined }));
  const err2 = await createRestClient({ baseUrl: 'http://sb.test', fetch: plain.fetch }).GET('/v1/me').catch((e) => e);
  assert.equal(err2.status, 502);
  assert.deepEqual(err2.errors, []);
});

test('a missing path parameter is a TypeError before any request', async () => {
  const r = recorder(() => ({ status: 200, body: {} }));
  const api = createRestClient({ baseUrl: 'http://sb.test', fetch: r.fetch });
  await assert.rejects(api.GET('/v1/tasks/{id}', { params: { path: {} } }), TypeError);
  assert.equal(r.calls.length, 0);
  assert.throws(() => createRestClient({}), TypeError);
});
