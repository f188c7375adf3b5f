package realtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard/switchboard/realtime/stream"
)

// Stored events take this path: Publish queues the event for the one
// append goroutine and waits; the goroutine takes whatever is queued (up to
// MaxBatch) and stores it with one stream.Append (one round trip, committed
// when it returns), then goes on with the next batch while a second
// goroutine, in batch order, queues the doorbells for the publish loop
// (which NOTIFYs them after the commit in its own round trip), hands the
// stored events to the local hub and answers the waiting publishers. So an
// event is acknowledged only once it is durable, the append of one batch
// overlaps the delivery and NOTIFY of the previous one, and what is
// delivered and rung keeps the order of the commits.

type appendReq struct {
	ev   stream.Event
	done chan error
}

// publishStored appends ev to its stream and returns once it committed.
// ctx bounds the wait for room in the append queue; once queued, the event
// is stored or refused by the append loop, whose database attempts are
// bounded (appendWithRetry), so Publish waits for that answer: a timeout
// after queueing would tell the caller to try again while the event may
// still be stored, and the retry would store it twice.
func (b *Bus) publishStored(ctx context.Context, ev Event, name string) error {
	req := appendReq{
		ev:   stream.Event{Stream: name, Event: ev.Event, ID: ev.ID, From: ev.From, Payload: ev.Payload},
		done: make(chan error, 1),
	}
	stopping := b.base.Stopping()
	select {
	case <-stopping:
		return ErrStopped
	default:
	}
	select {
	case b.appends <- req:
	case <-ctx.Done():
		return fmt.Errorf("queue %s for its stream: %w", ev.Event, ctx.Err())
	case <-stopping:
		return ErrStopped
	}
	select {
	case err := <-req.done:
		return err
	case <-b.appendsDone:
		select { // the loop answered it last, or exited before taking it
		case err := <-req.done:
			return err
		default:
			return ErrStopped
		}
	}
}

// storedBatch is a committed batch on its way to delivery.
type storedBatch struct {
	reqs   []appendReq
	stored []stream.Event
}

// appendLoop is the one goroutine that appends; deliverLoop delivers and
// rings what it stored, in order. When Stop begins it appends what is
// queued (within StopTimeout), waits for the last deliveries and closes
// appendsDone, after which the publish loop sends the last doorbells.
func (b *Bus) appendLoop(ctx context.Context) {
	defer close(b.appendsDone)
	committed := make(chan storedBatch, 2)
	var wg sync.WaitGroup
	wg.Go(func() { b.deliverLoop(ctx, committed) })
	defer wg.Wait()
	defer close(committed)
	stopping := b.base.Stopping()
	for {
		select {
		case req := <-b.appends:
			b.appendBatch(ctx, b.collectAppends(req), committed)
		case <-stopping:
			for {
				select {
				case req := <-b.appends:
					b.appendBatch(ctx, b.collectAppends(req), committed)
				default:
					return
				}
			}
		}
	}
}

// deliverLoop rings, delivers locally and acknowledges committed batches
// in commit order.
func (b *Bus) deliverLoop(ctx context.Context, committed <-chan storedBatch) {
	for sb := range committed {
		b.ring(ctx, sb.stored)
		if b.hub != nil {
			b.hub.offer(b.localOffers(sb.stored))
		}
		for _, req := range sb.reqs {
			req.done <- nil
		}
	}
}

func (b *Bus) collectAppends(first appendReq) []appendReq {
	batch := []appendReq{first}
	for len(batch) < b.opts.MaxBatch {
		select {
		case req := <-b.appends:
			batch = append(batch, req)
		default:
			return batch
		}
	}
	return batch
}

// appendBatch stores a batch and hands it to the delivery loop. An event
// the store refuses (stream.ErrInvalid) fails alone: the batch is split
// until it is isolated.
func (b *Bus) appendBatch(ctx context.Context, batch []appendReq, committed chan<- storedBatch) {
	evs := make([]stream.Event, len(batch))
	for i, req := range batch {
		evs[i] = req.ev
	}
	stored, err := b.appendWithRetry(ctx, evs)
	if errors.Is(err, stream.ErrInvalid) && len(batch) > 1 {
		half := len(batch) / 2
		b.appendBatch(ctx, batch[:half], committed)
		b.appendBatch(ctx, batch[half:], committed)
		return
	}
	if err != nil {
		b.metrics.appendFailed.Add(float64(len(batch)))
		for _, req := range batch {
			req.done <- err
		}
		return
	}
	b.metrics.appended.Add(float64(len(batch)))
	b.metrics.appendBatch.Observe(float64(len(batch)))
	committed <- storedBatch{reqs: batch, stored: stored}
}

// appendWithRetry appends, retrying a database that is away (not one that
// refuses the data) three times within 5 s.
func (b *Bus) appendWithRetry(ctx context.Context, evs []stream.Event) ([]stream.Event, error) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		stored, err := b.opts.Store.AppendStored(actx, evs)
		cancel()
		if err == nil || errors.Is(err, stream.ErrInvalid) || refusedContent(err) || attempt == 3 || ctx.Err() != nil {
			if err != nil && !errors.Is(err, stream.ErrInvalid) {
				b.logger.Error("events not stored: the database did not take them", "events", len(evs), "error", err)
				err = fmt.Errorf("store events: %w", err)
			}
			return stored, err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff *= 2
	}
}

// ring queues the doorbells of stored events for the publish loop.
func (b *Bus) ring(ctx context.Context, stored []stream.Event) {
	bells, err := stream.EncodeDoorbells(b.opts.NodeID, stored, maxDoorbellBytes)
	if err != nil {
		b.logger.Error("doorbell not encoded; other replicas read on their next gap", "error", err)
		return
	}
	for _, bell := range bells {
		select {
		case b.queue <- outgoing{payload: bell, doorbell: true}:
		case <-ctx.Done():
			b.drop([]outgoing{{payload: bell}}, "doorbell dropped at shutdown", ctx.Err())
			return
		}
	}
}

// maxDoorbellBytes keeps doorbells under NOTIFY's limit.
const maxDoorbellBytes = stream.DefaultDoorbellBytes

// receiveDoorbell hands a doorbell from another replica to the hub: bodies
// are offered as they are, ranges without them are read by the followers
// behind.
func (b *Bus) receiveDoorbell(payload string) {
	d, err := stream.DecodeDoorbell(payload)
	if err != nil {
		b.logger.Warn("bus: unreadable doorbell", "error", err)
		return
	}
	b.metrics.received.Inc()
	for _, r := range d.Ranges {
		if !b.hub.hasFollowers(r.Stream) {
			continue
		}
		if evs := r.Events(); evs != nil {
			b.hub.offer(evs)
		} else {
			b.hub.behind(r.Stream, r.Last)
		}
	}
}

// localOffers is what of this replica's appends goes to its sockets at
// once: all but the events of streams whose access the hub guards (rooms,
// projects): they come back through LISTEN, ordered after evictions.
func (b *Bus) localOffers(stored []stream.Event) []stream.Event {
	out := make([]stream.Event, 0, len(stored))
	for _, ev := range stored {
		if !b.hub.guarded(ev.Stream) {
			out = append(out, ev)
		}
	}
	return out
}

// receiveOwnDoorbell delivers this replica's own events of guarded
// streams, held back by localOffers, once their doorbell has come back
// through LISTEN.
func (b *Bus) receiveOwnDoorbell(payload string) {
	if b.hub == nil {
		return
	}
	d, err := stream.DecodeDoorbell(payload)
	if err != nil {
		b.logger.Warn("bus: unreadable doorbell", "error", err)
		return
	}
	for _, r := range d.Ranges {
		if !b.hub.guarded(r.Stream) || !b.hub.hasFollowers(r.Stream) {
			continue
		}
		if evs := r.Events(); evs != nil {
			b.hub.offer(evs)
		} else {
			b.hub.behind(r.Stream, r.Last)
		}
	}
}
