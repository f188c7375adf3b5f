// The package promise: ESM, no runtime dependencies, nothing Node-only in src/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';

const src = new URL('../../src/', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));

test('no runtime dependencies; ESM; types declared', () => {
  assert.equal(pkg.type, 'module');
  assert.equal(pkg.dependencies, undefined);
  assert.deepEqual(Object.keys(pkg.devDependencies).sort(), ['openapi-typescript', 'pg', 'standardwebhooks', 'ws']);
  assert.equal(pkg.exports['.'].types, './index.d.ts');
});

test('src/ imports only its own files and uses no Node globals', () => {
  for (const f of readdirSync(src)) {
    const text = readFileSync(new URL(f, src), 'utf8');
    for (const [, spec] of text.matchAll(/^\s*(?:import|export)[^'"]*from\s+['"]([^'"]+)['"]/gm)) {
      assert.match(spec, /^\.\//, `${f} imports ${spec}`);
    }
    assert.doesNotMatch(text, /\b(require\(|process\.|Buffer\.|__dirname)/, `${f} uses a Node-only API`);
  }
});
