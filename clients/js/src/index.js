// Switchboard's realtime client: ESM, no dependencies, browsers and Node ≥ 20.
export { RealtimeClient, CloseCodes } from './client.js';
export { backoffDelay, DEFAULT_BACKOFF, DEFAULT_RATE_LIMITED_BACKOFF } from './backoff.js';
export { StreamTracker, isStored } from './streams.js';
export { createRestClient, ProblemError } from './rest.js';
