// Positions of durable streams: what was delivered, duplicate drops, the
// reordering window of a resume, and what a `resumed` frame means.
//
// Pure state, no I/O: every method returns the actions the client emits, in
// order: {type:'deliver', frame} | {type:'gap', ...} | {type:'reset', ...}.

/** A frame is stored (part of a stream) when it has a stream and an integer offset. */
export function isStored(frame) {
  return typeof frame.stream === 'string' && Number.isInteger(frame.offset) && frame.offset > 0;
}

export class StreamTracker {
  /** @param {Record<string, {epoch: string, offset: number}>} [initial] */
  constructor(initial = {}) {
    /** @type {Map<string, {epoch: string, offset: number, recovered: boolean | null}>} */
    this.positions = new Map();
    /** offsets that arrived ahead of a hole while resuming, per stream */
    this.pending = new Map();
    /** streams whose `resumed` entry has not come yet */
    this.resuming = new Set();
    /** streams that already got a reset in this resume (an epoch change seen in a frame) */
    this.resetDone = new Set();
    this.duplicates = 0;
    for (const [stream, p] of Object.entries(initial)) {
      if (p && typeof p.epoch === 'string' && Number.isInteger(p.offset) && p.offset >= 0) {
        this.positions.set(stream, { epoch: p.epoch, offset: p.offset, recovered: null });
      }
    }
  }

  /** Position of one stream, or undefined. */
  get(stream) {
    return this.positions.get(stream);
  }

  /** Forget a stream (a room left): joining again is live only. */
  forget(stream) {
    this.positions.delete(stream);
    this.pending.delete(stream);
    this.resuming.delete(stream);
  }

  /** What a resume frame says: {stream: {offset, epoch}} for the given streams. */
  resumePayload(streams) {
    const out = {};
    for (const s of streams) {
      const p = this.positions.get(s);
      if (p) out[s] = { offset: p.offset, epoch: p.epoch };
    }
    return out;
  }

  /** Start waiting for the `resumed` entries of these streams. */
  beginResume(streams) {
    this.resuming = new Set(streams);
    this.resetDone.clear();
    this.pending.clear();
  }

  /** The socket closed mid-resume: what was held back is asked for again next time. */
  abandonResume() {
    this.resuming.clear();
    this.resetDone.clear();
    this.pending.clear();
  }

  /** One frame from the server. */
  accept(frame) {
    if (!isStored(frame)) return [{ type: 'deliver', frame }];
    const s = frame.stream;
    const epoch = String(frame.epoch ?? '');
    const pos = this.positions.get(s);
    if (!pos) {
      this.positions.set(s, { epoch, offset: frame.offset, recovered: null });
      return [{ type: 'deliver', frame }];
    }
    // A position in a stream that had no event yet (epoch '', offset 0) continues in its first epoch.
    if (pos.epoch === '' && pos.offset === 0) pos.epoch = epoch;
    if (pos.epoch !== epoch) return this.#epochChanged(s, pos, frame, epoch);
    if (frame.offset <= pos.offset) {
      this.duplicates++;
      return [];
    }
    if (frame.offset > pos.offset + 1 && this.resuming.has(s)) {
      this.#hold(s, frame);
      return [];
    }
    return this.#advance(s, pos, frame);
  }

  /** The payload of a `resumed` frame: {stream: {recovered, epoch, offset}}. */
  resumed(streams) {
    const out = [];
    for (const [s, r] of Object.entries(streams ?? {})) {
      if (!r || typeof r !== 'object') continue;
      const pos = this.positions.get(s);
      const epoch = String(r.epoch ?? '');
      const last = Number.isInteger(r.offset) ? r.offset : 0;
      if (!pos) {
        // A stream this client never had a position in: nothing to refetch, follow from here.
        this.positions.set(s, { epoch, offset: last, recovered: r.recovered === true });
      } else if (r.recovered === true && pos.epoch === epoch) {
        pos.recovered = true;
        out.push(...this.#flush(s));
        if (pos.offset < last) {
          out.push({ type: 'gap', stream: s, epoch, from: pos.offset + 1, to: last });
          pos.offset = last;
        }
      } else {
        out.push(...this.#notRecovered(s, pos, epoch, last));
      }
      this.resuming.delete(s);
    }
    return out;
  }

  /** No `resumed` came in time for the streams still waiting: deliver what was held. */
  endResume() {
    const out = [];
    for (const s of this.resuming) out.push(...this.#flush(s));
    this.resuming.clear();
    return out;
  }

  /** {stream: {epoch, offset, recovered}} of every stream. */
  snapshot() {
    const out = {};
    for (const [s, p] of this.positions) out[s] = { ...p };
    return out;
  }

  #hold(s, frame) {
    let held = this.pending.get(s);
    if (!held) this.pending.set(s, (held = new Map()));
    held.set(frame.offset, frame);
  }

  #advance(s, pos, frame) {
    const out = [];
    if (frame.offset > pos.offset + 1) {
      out.push({ type: 'gap', stream: s, epoch: pos.epoch, from: pos.offset + 1, to: frame.offset - 1 });
    }
    pos.offset = frame.offset;
    out.push({ type: 'deliver', frame });
    const held = this.pending.get(s);
    while (held && held.has(pos.offset + 1)) {
      const next = held.get(pos.offset + 1);
      held.delete(next.offset);
      pos.offset = next.offset;
      out.push({ type: 'deliver', frame: next });
    }
    return out;
  }

  // Held frames in offset order, holes reported as gaps.
  #flush(s) {
    const held = this.pending.get(s);
    this.pending.delete(s);
    const pos = this.positions.get(s);
    if (!held || !pos) return [];
    const out = [];
    for (const off of [...held.keys()].sort((a, b) => a - b)) {
      if (off > pos.offset) out.push(...this.#advance(s, pos, held.get(off)));
    }
    return out;
  }

  #epochChanged(s, pos, frame, epoch) {
    const out = [];
    if (!this.resetDone.has(s)) {
      out.push({ type: 'reset', stream: s, reason: 'epoch_changed', epoch, offset: frame.offset - 1,
        previous: { epoch: pos.epoch, offset: pos.offset } });
      this.resetDone.add(s);
    }
    this.pending.delete(s);
    this.positions.set(s, { epoch, offset: frame.offset, recovered: false });
    out.push({ type: 'deliver', frame });
    return out;
  }

  #notRecovered(s, pos, epoch, last) {
    const out = [];
    // Already re-based on a frame of the new epoch in this resume: keep what was emitted since.
    const rebased = this.resetDone.has(s) && pos && pos.epoch === epoch;
    if (!this.resetDone.has(s)) {
      out.push({ type: 'reset', stream: s, reason: 'not_recovered', epoch, offset: last,
        previous: pos ? { epoch: pos.epoch, offset: pos.offset } : null });
    }
    this.resetDone.delete(s);
    const held = pos && pos.epoch === epoch ? this.pending.get(s) : undefined;
    this.pending.delete(s);
    // Otherwise the server's head: a position beyond it (history restored) moves back.
    const next = { epoch, offset: rebased ? Math.max(pos.offset, last) : last, recovered: false };
    this.positions.set(s, next);
    // What the server sent beyond its reported head is newer than the state the app refetches.
    for (const off of held ? [...held.keys()].sort((a, b) => a - b) : []) {
      if (off > next.offset) out.push(...this.#advance(s, next, held.get(off)));
    }
    return out;
  }
}
