// Who is in each joined room, kept from presence.join / presence.leave frames
// (docs/api.md "Presence") and, when the app gives a getPresence function,
// from a GET /v1/presence snapshot taken after every room.joined. Frames that
// arrive while the snapshot loads are applied on top of it: the snapshot was
// read no earlier than the request was sent, so each such frame is as new as it.

export class PresenceBook {
  #rooms = new Map(); // room -> {members: Set, pending: null | [{user, joined}], gen}

  /** The user ids present in room, sorted; undefined for a room not joined. */
  members(room) {
    const r = this.#rooms.get(room);
    return r ? [...r.members].sort() : undefined;
  }

  /** A socket joined room: start afresh (frames missed while away are unknown). Returns a generation token. */
  joined(room, loading) {
    const gen = (this.#rooms.get(room)?.gen ?? 0) + 1;
    this.#rooms.set(room, { members: new Set(), pending: loading ? [] : null, gen });
    return gen;
  }

  forget(room) { this.#rooms.delete(room); }

  /** Applies a presence frame; returns the change, or null when it changed nothing (or the room is not joined). */
  frame(frame) {
    const r = this.#rooms.get(frame.room);
    const user = frame.payload?.user_id;
    if (!r || typeof user !== 'string') return null;
    const joined = frame.event === 'presence.join';
    if (r.pending) {
      r.pending.push({ user, joined });
      return null;
    }
    return this.#apply(frame.room, r, user, joined);
  }

  /** The snapshot of generation gen arrived (users: [{user_id}]); returns the members, or null if outdated. */
  snapshot(room, gen, users) {
    const r = this.#rooms.get(room);
    if (!r || r.gen !== gen || !r.pending) return null;
    r.members = new Set(users.map((u) => u.user_id));
    for (const p of r.pending) (p.joined ? r.members.add(p.user) : r.members.delete(p.user));
    r.pending = null;
    return this.members(room);
  }

  /** Whether generation gen of room still waits for its snapshot. */
  current(room, gen) {
    const r = this.#rooms.get(room);
    return Boolean(r && r.gen === gen && r.pending);
  }

  /** The snapshot failed: go on from the frames alone; returns the members, or null if outdated. */
  snapshotFailed(room, gen) {
    if (!this.current(room, gen)) return null;
    const r = this.#rooms.get(room);
    for (const p of r.pending) this.#apply(room, r, p.user, p.joined);
    r.pending = null;
    return this.members(room);
  }

  #apply(room, r, user, joined) {
    if (joined === r.members.has(user)) return null;
    if (joined) r.members.add(user);
    else r.members.delete(user);
    return { room, userId: user, joined, members: this.members(room) };
  }
}
