// PresenceBook: members from presence frames on top of a snapshot.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PresenceBook } from '../../src/presence.js';

const join = (room, user) => ({ event: 'presence.join', room, payload: { user_id: user } });
const leave = (room, user) => ({ event: 'presence.leave', room, payload: { user_id: user } });

test('frames change the members of a joined room only', () => {
  const b = new PresenceBook();
  assert.equal(b.frame(join('r', 'a')), null, 'a room not joined');
  assert.equal(b.members('r'), undefined);
  b.joined('r', false);
  assert.deepEqual(b.frame(join('r', 'b')), { room: 'r', userId: 'b', joined: true, members: ['b'] });
  assert.equal(b.frame(join('r', 'b')), null, 'a repeated join changes nothing');
  b.frame(join('r', 'a'));
  assert.deepEqual(b.members('r'), ['a', 'b']);
  assert.deepEqual(b.frame(leave('r', 'b')), { room: 'r', userId: 'b', joined: false, members: ['a'] });
  assert.equal(b.frame({ event: 'presence.join', room: 'r', payload: {} }), null, 'no user_id');
  b.forget('r');
  assert.equal(b.members('r'), undefined);
});

test('frames received while the snapshot loads apply on top of it', () => {
  const b = new PresenceBook();
  const gen = b.joined('r', true);
  assert.equal(b.frame(join('r', 'c')), null, 'held until the snapshot');
  assert.equal(b.frame(leave('r', 'a')), null);
  assert.deepEqual(b.members('r'), []);
  assert.deepEqual(b.snapshot('r', gen, [{ user_id: 'a' }, { user_id: 'b' }]), ['b', 'c']);
  assert.deepEqual(b.frame(leave('r', 'b')), { room: 'r', userId: 'b', joined: false, members: ['c'] });
});

test('a snapshot of an earlier join is ignored; a failed one leaves the frames', () => {
  const b = new PresenceBook();
  const first = b.joined('r', true);
  const second = b.joined('r', true); // the socket dropped and joined again
  assert.equal(b.current('r', first), false);
  assert.equal(b.snapshot('r', first, [{ user_id: 'stale' }]), null);
  b.frame(join('r', 'x'));
  assert.deepEqual(b.snapshotFailed('r', second), ['x']);
  assert.equal(b.snapshotFailed('r', second), null, 'once');
});
