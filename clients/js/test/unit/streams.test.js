import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StreamTracker } from '../../src/index.js';

const ev = (stream, offset, epoch = 'e1') => ({ event: 'dm', stream, offset, epoch, payload: { n: offset } });
const delivered = (actions) => actions.filter((a) => a.type === 'deliver').map((a) => `${a.frame.stream}#${a.frame.offset}`);

test('StreamTracker', async (t) => {
  await t.test('ephemeral frames pass through untouched', () => {
    const tr = new StreamTracker();
    const f = { event: 'typing', from: 'u' };
    assert.deepEqual(tr.accept(f), [{ type: 'deliver', frame: f }]);
    assert.deepEqual(tr.snapshot(), {});
  });

  await t.test('drops offsets at or below the last delivered one, per stream', () => {
    const tr = new StreamTracker();
    const out = [ev('user:a', 1), ev('user:a', 2), ev('user:a', 2), ev('room:x', 1), ev('user:a', 1), ev('user:a', 3)].flatMap((f) => tr.accept(f));
    assert.deepEqual(delivered(out), ['user:a#1', 'user:a#2', 'room:x#1', 'user:a#3']);
    assert.equal(tr.duplicates, 2);
    assert.deepEqual(tr.snapshot(), { 'user:a': { epoch: 'e1', offset: 3, recovered: null }, 'room:x': { epoch: 'e1', offset: 1, recovered: null } });
  });

  await t.test('a stream known empty (epoch "", offset 0) takes its first epoch without a reset', () => {
    const tr = new StreamTracker();
    tr.resumed({ 'inbox:a': { recovered: true, epoch: '', offset: 0 } });
    const out = [ev('inbox:a', 1, 'e7'), ev('inbox:a', 2, 'e7')].flatMap((f) => tr.accept(f));
    assert.deepEqual(out.map((a) => a.type), ['deliver', 'deliver']);
    assert.deepEqual(tr.snapshot()['inbox:a'], { epoch: 'e7', offset: 2, recovered: true });
  });

  await t.test('a hole outside a resume is reported as a gap, then delivery goes on', () => {
    const tr = new StreamTracker();
    tr.accept(ev('user:a', 1));
    const out = tr.accept(ev('user:a', 4));
    assert.deepEqual(out[0], { type: 'gap', stream: 'user:a', epoch: 'e1', from: 2, to: 3 });
    assert.deepEqual(delivered(out), ['user:a#4']);
  });

  await t.test('while resuming, frames ahead of a hole wait and come out in order', () => {
    const tr = new StreamTracker({ 'user:a': { epoch: 'e1', offset: 3 } });
    tr.beginResume(['user:a']);
    assert.deepEqual(tr.accept(ev('user:a', 6)), []);
    assert.deepEqual(tr.accept(ev('user:a', 5)), []);
    assert.deepEqual(delivered(tr.accept(ev('user:a', 4))), ['user:a#4', 'user:a#5', 'user:a#6']);
    assert.deepEqual(tr.accept(ev('user:a', 5)), []);
    const out = tr.resumed({ 'user:a': { recovered: true, epoch: 'e1', offset: 6 } });
    assert.deepEqual(out, []);
    assert.deepEqual(tr.get('user:a'), { epoch: 'e1', offset: 6, recovered: true });
  });

  await t.test('recovered with events still missing at the resumed frame: held ones flushed, the rest a gap', () => {
    const tr = new StreamTracker({ 'user:a': { epoch: 'e1', offset: 3 } });
    tr.beginResume(['user:a']);
    tr.accept(ev('user:a', 6));
    const out = tr.resumed({ 'user:a': { recovered: true, epoch: 'e1', offset: 8 } });
    assert.deepEqual(out.map((a) => a.type), ['gap', 'deliver', 'gap']);
    assert.deepEqual(out[0], { type: 'gap', stream: 'user:a', epoch: 'e1', from: 4, to: 5 });
    assert.deepEqual(out[2], { type: 'gap', stream: 'user:a', epoch: 'e1', from: 7, to: 8 });
    assert.equal(tr.get('user:a').offset, 8);
  });

  await t.test('recovered:false resets the position to the server head and emits one reset', () => {
    const tr = new StreamTracker({ 'room:x': { epoch: 'e1', offset: 7 } });
    tr.beginResume(['room:x']);
    assert.deepEqual(tr.accept(ev('room:x', 1199, 'e1')), []);
    assert.deepEqual(tr.accept(ev('room:x', 1201, 'e1')), []);
    const out = tr.resumed({ 'room:x': { recovered: false, epoch: 'e1', offset: 1200 } });
    assert.deepEqual(out[0], { type: 'reset', stream: 'room:x', reason: 'not_recovered', epoch: 'e1', offset: 1200, previous: { epoch: 'e1', offset: 7 } });
    assert.deepEqual(delivered(out), ['room:x#1201'], 'held frames past the head are newer than the refetched state');
    assert.deepEqual(tr.get('room:x'), { epoch: 'e1', offset: 1201, recovered: false });
    assert.deepEqual(delivered(tr.accept(ev('room:x', 1202))), ['room:x#1202']);
  });

  await t.test('a position beyond the head (history restored) moves back to the head', () => {
    const tr = new StreamTracker({ 'user:a': { epoch: 'e1', offset: 500 } });
    tr.beginResume(['user:a']);
    const out = tr.resumed({ 'user:a': { recovered: false, epoch: 'e1', offset: 300 } });
    assert.deepEqual(out.map((a) => a.type), ['reset']);
    assert.equal(out[0].offset, 300);
    assert.deepEqual(delivered(tr.accept(ev('user:a', 301))), ['user:a#301'], 'not a duplicate of the lost 301..500');
  });

  await t.test('a new epoch in a frame resets once, and the resumed frame does not reset again', () => {
    const tr = new StreamTracker({ 'room:x': { epoch: 'e1', offset: 50 } });
    tr.beginResume(['room:x']);
    const first = tr.accept(ev('room:x', 1, 'e2'));
    assert.deepEqual(first.map((a) => a.type), ['reset', 'deliver']);
    assert.equal(first[0].reason, 'epoch_changed');
    assert.deepEqual(first[0].previous, { epoch: 'e1', offset: 50 });
    assert.deepEqual(delivered(tr.accept(ev('room:x', 2, 'e2'))), ['room:x#2']);
    assert.deepEqual(tr.resumed({ 'room:x': { recovered: false, epoch: 'e2', offset: 2 } }), []);
    assert.deepEqual(tr.get('room:x'), { epoch: 'e2', offset: 2, recovered: false });
    assert.deepEqual(tr.accept(ev('room:x', 2, 'e2')), [], 'duplicates in the new epoch are dropped');
  });

  await t.test('a stream first seen in a resumed frame is followed from its head, without a reset', () => {
    const tr = new StreamTracker();
    assert.deepEqual(tr.resumed({ 'user:a': { recovered: false, epoch: 'e1', offset: 10 } }), []);
    assert.deepEqual(tr.accept(ev('user:a', 10)), []);
    assert.deepEqual(delivered(tr.accept(ev('user:a', 11))), ['user:a#11']);
  });

  await t.test('abandoning a resume drops what was held: the next resume asks for it again', () => {
    const tr = new StreamTracker({ 'user:a': { epoch: 'e1', offset: 3 } });
    tr.beginResume(['user:a']);
    tr.accept(ev('user:a', 5));
    tr.abandonResume();
    assert.deepEqual(tr.resumePayload(['user:a']), { 'user:a': { offset: 3, epoch: 'e1' } });
    assert.deepEqual(tr.endResume(), []);
  });

  await t.test('endResume delivers held frames in order with their gap', () => {
    const tr = new StreamTracker({ 'user:a': { epoch: 'e1', offset: 1 } });
    tr.beginResume(['user:a']);
    tr.accept(ev('user:a', 4));
    tr.accept(ev('user:a', 3));
    const out = tr.endResume();
    assert.deepEqual(out.map((a) => a.type), ['gap', 'deliver', 'deliver']);
    assert.deepEqual(delivered(out), ['user:a#3', 'user:a#4']);
  });

  await t.test('initial positions are validated', () => {
    const tr = new StreamTracker({ ok: { epoch: 'e', offset: 0 }, bad: { epoch: 1, offset: 2 }, worse: null });
    assert.deepEqual(Object.keys(tr.snapshot()), ['ok']);
  });
});
