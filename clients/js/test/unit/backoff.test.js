import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, DEFAULT_BACKOFF, DEFAULT_RATE_LIMITED_BACKOFF } from '../../src/index.js';

test('backoffDelay: exponential cap, full jitter, capped at maxMs', () => {
  const policy = { initialMs: 100, maxMs: 1000 };
  const cases = [
    { attempt: 1, random: 1, want: 100 },
    { attempt: 2, random: 1, want: 200 },
    { attempt: 3, random: 1, want: 400 },
    { attempt: 4, random: 1, want: 800 },
    { attempt: 5, random: 1, want: 1000 },
    { attempt: 60, random: 1, want: 1000 },
    { attempt: 3, random: 0.5, want: 200 },
    { attempt: 3, random: 0, want: 0 },
    { attempt: 0, random: 1, want: 100 },
  ];
  for (const c of cases) {
    assert.equal(backoffDelay(c.attempt, policy, () => c.random), c.want, JSON.stringify(c));
  }
});

test('backoffDelay: a floor keeps the delay in [floor*cap, cap]', () => {
  const policy = { initialMs: 1000, maxMs: 8000, floor: 0.5 };
  assert.equal(backoffDelay(1, policy, () => 0), 500);
  assert.equal(backoffDelay(1, policy, () => 1), 1000);
  assert.equal(backoffDelay(4, policy, () => 0), 4000);
});

test('the rate-limited policy waits longer than the normal one, and never zero', () => {
  for (let attempt = 1; attempt < 8; attempt++) {
    assert.ok(backoffDelay(attempt, DEFAULT_RATE_LIMITED_BACKOFF, () => 0) >= backoffDelay(attempt, DEFAULT_BACKOFF, () => 1) / 2);
    assert.ok(backoffDelay(attempt, DEFAULT_RATE_LIMITED_BACKOFF, () => 0) > 0);
  }
});
