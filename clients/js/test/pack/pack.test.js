// The published package, as a user gets it: `npm pack` makes the tarball, a scratch
// project in a temp dir installs it, imports it from ESM through its `exports` map, and
// type-checks a TypeScript file against its declarations with tsc.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
const tsc = join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc');

const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

// A consumer's source: the realtime and REST clients, their option and frame types, the
// generated API types; and misuse that must not compile.
const consumerTS = `
import { RealtimeClient, createRestClient, ProblemError, type Frame, type Schema } from '${pkg.name}';

const rt = new RealtimeClient({ url: 'http://localhost:8080', getTicket: async () => 'ticket' });
rt.on('message', (frame: Frame) => { const e: string = frame.event; void e; });
const api = createRestClient({ baseUrl: 'http://localhost:8080', apiKey: 'sbk_x' });

export async function use(): Promise<string> {
  const task: Schema<'Task'> = await api.POST('/v1/tasks', { body: { name: 'n', schedule: null, action: { type: 'publish', event: 'e' } } });
  // @ts-expect-error unknown route
  await api.GET('/v1/nope');
  try { await api.GET('/v1/me'); } catch (e) { if (e instanceof ProblemError) return e.message; }
  return task.id;
}
`;

test('npm pack installs into a fresh project, imports from ESM and type-checks', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-client-pack-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));

  const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', dir], pkgDir));
  const files = packed.files.map((f) => f.path).sort();
  for (const want of ['package.json', 'README.md', 'index.d.ts', 'src/index.js', 'src/api.d.ts']) {
    assert.ok(files.includes(want), `${want} is not in the tarball: ${files.join(', ')}`);
  }
  assert.deepEqual(files.filter((f) => f.startsWith('test/') || f.startsWith('scripts/') || f.includes('node_modules')), [],
    'tests, scripts or dependencies were packed');
  assert.equal(pkg.dependencies, undefined, 'the client has no runtime dependencies');

  const app = join(dir, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  run('npm', ['install', '--no-audit', '--no-fund', '--offline', join(dir, packed.filename)], app);
  const installed = JSON.parse(readFileSync(join(app, 'node_modules', ...pkg.name.split('/'), 'package.json'), 'utf8'));
  assert.equal(installed.version, pkg.version);

  const esm = run('node', ['--input-type=module', '-e', `
    const m = await import('${pkg.name}');
    console.log(JSON.stringify({ realtime: typeof m.RealtimeClient, rest: typeof m.createRestClient }));
    try { await import('${pkg.name}/src/rest.js'); console.log('deep import allowed'); } catch { console.log('deep import refused'); }
  `], app).trim().split('\n');
  assert.deepEqual(JSON.parse(esm[0]), { realtime: 'function', rest: 'function' });
  assert.equal(esm[1], 'deep import refused', 'the exports map should expose only the package root');

  writeFileSync(join(app, 'consumer.ts'), consumerTS);
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022', 'dom'], types: [] },
    files: ['consumer.ts'],
  }));
  try {
    run('node', [tsc, '-p', 'tsconfig.json'], app);
  } catch (err) {
    assert.fail(`tsc rejected the consumer against the installed package:\n${err.stdout}${err.stderr}`);
  }
});
