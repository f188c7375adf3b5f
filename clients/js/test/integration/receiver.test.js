// A Node webhook receiver, as docs/jobs.md shows it, against a real replica:
// it verifies each call with the official standardwebhooks package. Across a
// signing-secret rotation a receiver holding either secret verifies while
// the overlap lasts; once it ends only the new secret does.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import standardwebhooks from 'standardwebhooks';
import { startCluster, missingPrerequisite } from '../support/cluster.js';

const { Webhook } = standardwebhooks;
const skip = missingPrerequisite() ?? false;
let cluster;
let hook;
const calls = []; // { body, headers } of each call received
let arrived = () => {}; // told of each call

/** nextCall resolves when a call arrives, within timeoutMs. */
function nextCall(timeoutMs = 20_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no webhook call within ${timeoutMs} ms`)), timeoutMs);
    arrived = () => { clearTimeout(timer); resolve(); };
  });
}

before(async () => {
  if (skip) return;
  cluster = await startCluster({ replicas: 1, env: { SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE: 'true' } });
  hook = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      calls.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
      res.writeHead(204).end();
      arrived();
    });
  });
  await new Promise((resolve) => hook.listen(0, '127.0.0.1', resolve));
}, { timeout: 120_000 });
after(async () => {
  hook?.close();
  await cluster?.stop();
});

/** verifies reports whether a receiver holding secret accepts call n. */
function verifies(secret, n) {
  try {
    new Webhook(secret).verify(calls[n].body, calls[n].headers);
    return true;
  } catch {
    return false;
  }
}

test('a receiver verifies with either secret during a rotation, with only the new one after', { skip }, async () => {
  const node = cluster.nodes[0];
  const user = await cluster.register('receiver');
  const api = (method, route, body) => cluster.api(node, method, route, { token: user.token, body });
  const created = await api('POST', '/v1/tasks', {
    name: 'node receiver', action: { type: 'webhook', url: `http://127.0.0.1:${hook.address().port}/hook` },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const task = created.body;
  const run = async () => {
    const n = calls.length;
    const call = nextCall();
    const r = await api('POST', `/v1/tasks/${task.id}/runs`);
    assert.equal(r.status, 202, JSON.stringify(r.body));
    await call;
    return n;
  };

  const first = await run();
  assert.ok(verifies(task.signing_secret, first), 'the task\'s secret verifies');

  const rotated = await api('POST', `/v1/tasks/${task.id}/rotate-secret`);
  assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
  const during = await run();
  assert.ok(verifies(task.signing_secret, during), 'the old secret verifies during the overlap');
  assert.ok(verifies(rotated.body.signing_secret, during), 'the new secret verifies during the overlap');

  // A rotation whose overlap ends at once: only the newest secret signs.
  const again = await api('POST', `/v1/tasks/${task.id}/rotate-secret`, { previous_expires_at: new Date(Date.now() - 1000).toISOString() });
  assert.equal(again.status, 200, JSON.stringify(again.body));
  const afterwards = await run();
  assert.ok(!verifies(rotated.body.signing_secret, afterwards), 'the replaced secret no longer verifies');
  assert.ok(!verifies(task.signing_secret, afterwards), 'the first secret no longer verifies');
  assert.ok(verifies(again.body.signing_secret, afterwards), 'the newest secret verifies');
});
