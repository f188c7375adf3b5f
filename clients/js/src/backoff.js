// Reconnect delays: exponential backoff with full jitter, capped.

/**
 * Delay before reconnect attempt `attempt` (1, 2, …): a uniformly random
 * time in [floor·cap, cap], where cap = min(maxMs, initialMs · 2^(attempt-1)).
 * floor 0 is "full jitter"; the rate-limited policy uses 0.5 so a 4029 never
 * comes back at once.
 */
export function backoffDelay(attempt, policy, random = Math.random) {
  const n = Math.max(1, attempt);
  const cap = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(n - 1, 30));
  const floor = policy.floor ?? 0;
  return Math.round(cap * (floor + (1 - floor) * random()));
}

export const DEFAULT_BACKOFF = Object.freeze({ initialMs: 500, maxMs: 30_000, floor: 0 });
export const DEFAULT_RATE_LIMITED_BACKOFF = Object.freeze({ initialMs: 5_000, maxMs: 120_000, floor: 0.5 });
