// The HA check's client (cmd/switchboard-hacheck, "durable stream"): one
// RealtimeClient for the user whose token is SB_TOKEN, connecting to the
// replicas in SB_REPLICAS (comma-separated base URLs) in turn, one per
// attempt. Every stored event it emits is printed as a JSON line on stdout,
// with the socket openings, closes, resets, gaps and errors; it closes and
// exits when stdin ends. Not part of `npm test`.
import WebSocket from 'ws';
import { RealtimeClient } from '../../src/index.js';

const replicas = (process.env.SB_REPLICAS ?? '').split(',').filter(Boolean);
const token = process.env.SB_TOKEN ?? '';
if (replicas.length === 0 || !token) {
  console.error('stream-client: SB_REPLICAS and SB_TOKEN are required');
  process.exit(2);
}

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
let next = 0;
let current = replicas[0];

// A ticket from the replica this attempt will connect to, or from any other
// that answers (a ticket is valid on every replica).
async function getTicket() {
  current = replicas[next++ % replicas.length];
  const order = [current, ...replicas.filter((r) => r !== current)];
  let last;
  for (const base of order) {
    try {
      const res = await fetch(`${base}/v1/ws/ticket`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: '{}',
        signal: AbortSignal.timeout(2000),
      });
      if (res.status === 201) return (await res.json()).ticket;
      last = new Error(`ticket from ${base}: ${res.status}`);
    } catch (err) {
      last = err;
    }
  }
  throw last;
}

const rt = new RealtimeClient({
  url: () => current,
  getTicket,
  WebSocket,
  backoff: { initialMs: 100, maxMs: 1000 },
  connectTimeoutMs: 3000,
});

const safe = (fn) => (d) => {
  try {
    fn(d);
  } catch (err) {
    console.error('stream-client listener:', err);
  }
};
rt.on('open', safe(() => out({ type: 'open', url: current })));
rt.on('close', safe((d) => out({ type: 'close', code: d.code, reconnect: d.reconnect })));
rt.on('reset', safe((d) => out({ type: 'reset', stream: d.stream, reason: d.reason, offset: d.offset })));
rt.on('gap', safe((d) => out({ type: 'gap', stream: d.stream, from: d.from, to: d.to })));
rt.on('error', safe((d) => out({ type: 'error', phase: d.phase, message: String(d.error?.message ?? d.error) })));
rt.on('message', safe((f) => {
  if (typeof f.offset !== 'number') return;
  out({ type: 'event', stream: f.stream, offset: f.offset, epoch: f.epoch, event: f.event, id: f.payload?.id ?? null });
}));

process.stdin.on('end', () => {
  rt.close();
  out({ type: 'done', duplicates: rt.duplicates });
  process.exit(0);
});
process.stdin.resume();

rt.connect().catch((err) => {
  console.error('stream-client: connect:', err);
  process.exit(1);
});
