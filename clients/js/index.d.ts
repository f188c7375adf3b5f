// Type declarations of @switchboard/client (hand-written; see README.md).

/** A frame as the server sends it (docs/api.md "Realtime"). */
export interface Frame<P = unknown> {
  event: string;
  room?: string;
  to?: string;
  from?: string;
  id?: string;
  payload?: P;
  ts?: string;
  /** Stored events only: `user:<id>` or `room:<name>`. */
  stream?: string;
  /** Stored events only: 1, 2, 3, … per stream and epoch. */
  offset?: number;
  /** Stored events only: changes when the stream's history was lost or reset. */
  epoch?: string;
}

/** A frame the client sends. */
export interface OutgoingFrame<P = unknown> {
  event: string;
  room?: string;
  to?: string;
  id?: string;
  payload?: P;
}

export interface StreamPosition {
  epoch: string;
  /** The last offset delivered to the application. */
  offset: number;
}

export interface StreamState extends StreamPosition {
  /** From the last `resumed` frame: null before any resume of this stream. */
  recovered: boolean | null;
}

export interface BackoffPolicy {
  /** Cap of the first delay (ms). */
  initialMs?: number;
  /** Largest cap (ms). */
  maxMs?: number;
  /** Delays are uniform in [floor·cap, cap]; 0 is full jitter. */
  floor?: number;
}

/** The constructor of a WebSocket: the browser's, Node 22's global, or the `ws` package's. */
export type WebSocketConstructor = new (url: string) => {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
};

export interface RealtimeOptions {
  /** Fetches a ticket: the app calls POST /v1/ws/ticket with its token. Throw an error with `retry: false` to stop. */
  getTicket: () => Promise<string>;
  /** The server's base URL (http(s) or ws(s)); `/v1/ws` is appended. A function is asked on every attempt. Default: location.origin. */
  url?: string | (() => string);
  /** Default globalThis.WebSocket (Node 20 has none: pass `ws`). */
  WebSocket?: WebSocketConstructor;
  /** Positions to resume from on the first socket (what `streams()` returned earlier). */
  streams?: Record<string, StreamPosition>;
  /** Default {initialMs: 500, maxMs: 30000, floor: 0}. */
  backoff?: BackoffPolicy;
  /** After a 4029 close. Default {initialMs: 5000, maxMs: 120000, floor: 0.5}. */
  rateLimitedBackoff?: BackoffPolicy;
  /** A socket open this long resets the backoff. Default 10000. */
  stableMs?: number;
  /** A socket not open after this is abandoned and retried. Default 15000. */
  connectTimeoutMs?: number;
  /** Held events are delivered if no `resumed` frame comes within this. Default 10000. */
  resumeTimeoutMs?: number;
  /** Retried frames written less than this before a drop are sent again. Default 1000. */
  confirmMs?: number;
  /** Frames send() may queue. Default 1000. */
  maxQueue?: number;
  /** Frames per second written (token bucket), under the server's default limits. Default 15. */
  sendRate?: number;
  /** Default 30. */
  sendBurst?: number;
  /** For tests: the jitter source. Default Math.random. */
  random?: () => number;
  /** For tests: the clock of the send pacer and backoff reset. Default Date.now. */
  now?: () => number;
}

export type State = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface CloseDetail {
  code: number;
  reason: string;
  reconnect: boolean;
  /** When reconnect is true. */
  delayMs?: number;
}

export interface ResetDetail {
  stream: string;
  /** not_recovered: the `resumed` frame said so; epoch_changed: a stored event came in another epoch. */
  reason: 'not_recovered' | 'epoch_changed';
  epoch: string;
  /** The server's last offset at the reset: events after it are delivered as usual. */
  offset: number;
  previous: StreamPosition | null;
}

export interface GapDetail {
  stream: string;
  epoch: string;
  from: number;
  to: number;
}

export interface EventMap {
  message: Frame;
  open: { attempt: number };
  close: CloseDetail;
  reconnecting: { attempt: number; delayMs: number; code: number };
  resumed: { streams: Record<string, { recovered: boolean; epoch: string; offset: number }> };
  reset: ResetDetail;
  gap: GapDetail;
  state: { state: State };
  error: { phase: 'ticket' | 'connect' | 'frame' | 'resume'; error: unknown };
}

export declare class RealtimeClient extends EventTarget {
  constructor(options: RealtimeOptions);
  readonly state: State;
  readonly rooms: string[];
  /** Frames waiting to be written. */
  readonly queued: number;
  /** Duplicate stored events dropped so far. */
  readonly duplicates: number;
  /** Positions of every stream, to persist and pass back as options.streams. */
  streams(): Record<string, StreamState>;
  /** Listens to one event (detail as argument); returns a function that stops listening. */
  on<K extends keyof EventMap>(type: K, fn: (detail: EventMap[K]) => void): () => void;
  /** `message:<event name>`, e.g. `message:dm`. */
  on(type: `message:${string}`, fn: (frame: Frame) => void): () => void;
  /** Resolves when the first socket is open; rejects if the client closes first. */
  connect(): Promise<void>;
  /** Joins now and on every later socket; resolves on room.joined, rejects when refused. */
  join(room: string): Promise<void>;
  leave(room: string): void;
  /** Queues a frame; false when the queue is full. `retry` defaults to true for room.message and dm. Throws a TypeError for room.join, room.leave and resume (use join/leave/options.streams). */
  send(frame: OutgoingFrame, options?: { retry?: boolean }): boolean;
  close(code?: number, reason?: string): void;
}

export declare const CloseCodes: {
  readonly NORMAL: 1000;
  readonly GOING_AWAY: 1001;
  readonly TOO_BIG: 1009;
  readonly SLOW_CONSUMER: 3008;
  readonly DISCONNECTED_BY_OPERATOR: 4001;
  readonly RATE_LIMITED: 4029;
};

export declare function backoffDelay(attempt: number, policy: Required<Pick<BackoffPolicy, 'initialMs' | 'maxMs'>> & BackoffPolicy, random?: () => number): number;
export declare const DEFAULT_BACKOFF: Readonly<Required<BackoffPolicy>>;
export declare const DEFAULT_RATE_LIMITED_BACKOFF: Readonly<Required<BackoffPolicy>>;

export type TrackerAction =
  | { type: 'deliver'; frame: Frame }
  | ({ type: 'gap' } & GapDetail)
  | ({ type: 'reset' } & ResetDetail);

/** The client's stream bookkeeping, exported for custom transports. */
export declare class StreamTracker {
  constructor(initial?: Record<string, StreamPosition>);
  readonly duplicates: number;
  get(stream: string): StreamState | undefined;
  forget(stream: string): void;
  resumePayload(streams: string[]): Record<string, StreamPosition>;
  beginResume(streams: string[]): void;
  abandonResume(): void;
  accept(frame: Frame): TrackerAction[];
  resumed(streams: Record<string, { recovered: boolean; epoch: string; offset: number }>): TrackerAction[];
  endResume(): TrackerAction[];
  snapshot(): Record<string, StreamState>;
}

export declare function isStored(frame: Frame): boolean;
