// A real Switchboard cluster for the integration tests: builds ./cmd/switchboard
// once (go build is a no-op when nothing changed), creates a fresh database on
// the PostgreSQL at TEST_DATABASE_URL, and runs N replicas on it as OS processes.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, mkdirSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';

const here = path.dirname(fileURLToPath(import.meta.url));
const jsRoot = path.resolve(here, '../..');
// SWITCHBOARD_SOURCE: build the server from another checkout (e.g. a branch's worktree).
const repoRoot = path.resolve(process.env.SWITCHBOARD_SOURCE ?? path.resolve(jsRoot, '../..'));
const run = promisify(execFile);

/** Why integration tests cannot run here, or null. */
export function missingPrerequisite() {
  if (!process.env.TEST_DATABASE_URL) return 'TEST_DATABASE_URL is not set (a PostgreSQL the tests may create databases on)';
  return null;
}

function goEnv() {
  return { ...process.env, PATH: `${process.env.PATH}:/usr/local/go/bin` };
}

export async function buildSwitchboard() {
  const dir = path.join(jsRoot, 'node_modules', '.cache', 'switchboard');
  mkdirSync(dir, { recursive: true });
  const bin = path.join(dir, 'switchboard');
  await run('go', ['build', '-o', bin, './cmd/switchboard'], { cwd: repoRoot, env: goEnv(), maxBuffer: 16 << 20 });
  return bin;
}

async function freePort() {
  const srv = createServer();
  await new Promise((resolve, reject) => srv.listen(0, '127.0.0.1', resolve).on('error', reject));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

async function createDatabase(adminURL) {
  const name = `sbjs_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  const c = new pg.Client({ connectionString: adminURL });
  await c.connect();
  try {
    await c.query(`CREATE DATABASE "${name}"`);
  } finally {
    await c.end();
  }
  const u = new URL(adminURL);
  u.pathname = `/${name}`;
  return { name, url: u.toString() };
}

async function dropDatabase(adminURL, name) {
  const c = new pg.Client({ connectionString: adminURL });
  await c.connect();
  try {
    await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await c.end();
  }
}

const SECRETS = {
  SWITCHBOARD_JWT_SECRET: 'jsclient-test-jwt-secret-0123456789',
  SWITCHBOARD_CLUSTER_SECRET: 'jsclient-test-cluster-secret-0123456789',
};

/** One replica as an OS process; start() may be called again after it exited. */
class Replica {
  constructor({ bin, dbURL, port, dir, name, extraEnv = {} }) {
    Object.assign(this, { bin, dbURL, port, dir, name, extraEnv });
    this.url = `http://127.0.0.1:${port}`;
    this.logPath = path.join(dir, `${name}.log`);
    this.proc = null;
  }

  env() {
    const env = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (k !== 'DATABASE_URL' && k !== 'PORT' && !k.startsWith('SWITCHBOARD_')) env[k] = v;
    }
    return {
      ...env, ...SECRETS,
      DATABASE_URL: this.dbURL,
      SWITCHBOARD_HTTP_ADDR: `127.0.0.1:${this.port}`,
      SWITCHBOARD_DATA_DIR: path.join(this.dir, `${this.name}-data`),
      SWITCHBOARD_LOG_FORMAT: 'text',
      SWITCHBOARD_SHUTDOWN_TIMEOUT: '5s',
      SWITCHBOARD_BCRYPT_COST: '4',
      SWITCHBOARD_AUTH_RATE: '1000',
      SWITCHBOARD_AUTH_BURST: '1000',
      SWITCHBOARD_USER_RATE: '1000',
      SWITCHBOARD_USER_BURST: '1000',
      // The smallest read budget: resumes and catch-ups of a few big events
      // already take many reads, each going on where the last stopped.
      SWITCHBOARD_READ_BYTES: '65536',
      ...this.extraEnv,
    };
  }

  running() {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async start() {
    if (this.running()) return;
    const fd = openSync(this.logPath, 'a');
    try {
      this.proc = spawn(this.bin, ['serve'], { env: this.env(), stdio: ['ignore', fd, fd] });
    } finally {
      closeSync(fd);
    }
    const proc = this.proc;
    this.exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    await this.waitReady(proc);
  }

  async waitReady(proc, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${this.name} exited before it was ready:\n${this.log()}`);
      try {
        const res = await fetch(`${this.url}/healthz/ready`, { signal: AbortSignal.timeout(3000) });
        if (res.status === 200) return;
        last = `status ${res.status}`;
      } catch (err) {
        last = err.message;
      }
      await new Promise((resolve) => setTimeout(resolve, 50)); // polling interval, not an assertion
    }
    throw new Error(`${this.name} not ready after ${timeoutMs} ms (${last}):\n${this.log()}`);
  }

  /** Sends sig and waits for the process to exit. */
  async stop(sig = 'SIGTERM') {
    if (!this.running()) return;
    this.proc.kill(sig);
    await this.exited;
  }

  log() {
    try { return readFileSync(this.logPath, 'utf8').slice(-8000); } catch { return ''; }
  }
}

/** Starts n replicas on a fresh database, with env added to theirs; cluster.stop() ends them and drops it. */
export async function startCluster({ replicas = 2, env = {} } = {}) {
  const adminURL = process.env.TEST_DATABASE_URL;
  const [bin, db] = await Promise.all([buildSwitchboard(), createDatabase(adminURL)]);
  const dir = mkdtempSync(path.join(tmpdir(), 'switchboard-js-'));
  const nodes = [];
  for (let i = 0; i < replicas; i++) {
    nodes.push(new Replica({ bin, dbURL: db.url, port: await freePort(), dir, name: `replica${i}`, extraEnv: env }));
  }
  const cluster = new Cluster({ adminURL, db, dir, nodes, bin });
  try {
    await nodes[0].start(); // migrates; the others then start at once
    await Promise.all(nodes.slice(1).map((n) => n.start()));
  } catch (err) {
    await cluster.stop({ keep: true });
    throw err;
  }
  return cluster;
}

class Cluster {
  constructor({ adminURL, db, dir, nodes, bin }) {
    Object.assign(this, { adminURL, db, dir, nodes, bin });
  }

  /** POST/GET JSON on a replica (headers: extra request headers); returns {status, body}. */
  async api(node, method, route, { token, body, headers } = {}) {
    const res = await fetch(`${node.url}${route}`, {
      method,
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** Registers a user with a unique email; returns {id, email, token}. */
  async register(prefix = 'user') {
    const email = `${prefix}-${Math.random().toString(36).slice(2, 10)}@example.com`;
    const node = this.nodes.find((n) => n.running()) ?? this.nodes[0];
    const r = await this.api(node, 'POST', '/v1/auth/register', { body: { email, password: 'password-123' } });
    if (r.status !== 201) throw new Error(`register: ${r.status} ${JSON.stringify(r.body)}`);
    return { id: r.body.user.id, email, token: r.body.token };
  }

  /** A getTicket function for RealtimeClient: POST /v1/ws/ticket on any replica that answers. */
  ticketFor(user, { count } = {}) {
    return async () => {
      if (count) count.n++;
      let lastErr;
      for (const node of this.nodes) {
        try {
          const r = await this.api(node, 'POST', '/v1/ws/ticket', { token: user.token });
          if (r.status === 201) return r.body.ticket;
          lastErr = new Error(`ticket: ${r.status} ${JSON.stringify(r.body)}`);
        } catch (err) {
          lastErr = err;
        }
      }
      throw lastErr;
    };
  }

  /** Grants admin with the `switchboard admin grant` command. */
  async grantAdmin(user) {
    const env = { ...this.nodes[0].env(), DATABASE_URL: this.db.url };
    await run(this.bin, ['admin', 'grant', user.email], { env });
  }

  async stop({ keep = false } = {}) {
    await Promise.all(this.nodes.map((n) => n.stop('SIGKILL')));
    if (keep) {
      console.error(`kept database ${this.db.url} and logs in ${this.dir}`);
      return;
    }
    await dropDatabase(this.adminURL, this.db.name);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
