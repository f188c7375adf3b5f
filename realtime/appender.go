package realtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/realtime/stream"
)

// Stored events take this path: Publish queues the event for the one
// append goroutine and waits; the goroutine takes whatever is queued (up to
// MaxBatch), stores it with one stream.Append (one round trip, committed
// when it returns), hands the stored events to the local hub, answers the
// waiting publishers and queues the doorbells for the publish loop, which
// NOTIFYs them after the commit in its own round trip. So an event is
// acknowledged only once it is durable, and the append of one batch
// overlaps the NOTIFY of the previous one.

type appendReq struct {
	ev   stream.Event
	done chan error
}

// publishStored appends ev to its stream and returns once it committed.
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
	case <-ctx.Done(): // it may still be stored
		return fmt.Errorf("append %s to its stream: %w", ev.Event, ctx.Err())
	}
}

// appendLoop is the one goroutine that appends. When Stop begins it
// appends what is queued (within StopTimeout) and closes appendsDone, after
// which the publish loop sends the last doorbells.
func (b *Bus) appendLoop(ctx context.Context) {
	defer close(b.appendsDone)
	stopping := b.base.Stopping()
	for {
		select {
		case req := <-b.appends:
			b.appendBatch(ctx, b.collectAppends(req))
		case <-stopping:
			for {
				select {
				case req := <-b.appends:
					b.appendBatch(ctx, b.collectAppends(req))
				default:
					return
				}
			}
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

// appendBatch stores a batch. An event the store refuses (stream.ErrInvalid)
// fails alone: the batch is split until it is isolated.
func (b *Bus) appendBatch(ctx context.Context, batch []appendReq) {
	evs := make([]stream.Event, len(batch))
	for i, req := range batch {
		evs[i] = req.ev
	}
	ps, err := b.appendWithRetry(ctx, evs)
	if errors.Is(err, stream.ErrInvalid) && len(batch) > 1 {
		half := len(batch) / 2
		b.appendBatch(ctx, batch[:half])
		b.appendBatch(ctx, batch[half:])
		return
	}
	if err != nil {
		b.metrics.appendFailed.Add(float64(len(batch)))
		for _, req := range batch {
			req.done <- err
		}
		return
	}
	stored := stream.Stored(evs, ps)
	b.metrics.appended.Add(float64(len(batch)))
	b.metrics.appendBatch.Observe(float64(len(batch)))
	if b.hub != nil {
		b.hub.offer(b.localOffers(stored)) // rooms.go
	}
	for _, req := range batch {
		req.done <- nil
	}
	b.ring(ctx, stored)
}

// appendWithRetry appends, retrying a database that is away (not one that
// refuses the data) three times within 5 s.
func (b *Bus) appendWithRetry(ctx context.Context, evs []stream.Event) ([]stream.Position, error) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ps, err := b.opts.Store.Append(actx, evs)
		cancel()
		if err == nil || errors.Is(err, stream.ErrInvalid) || refusedContent(err) || attempt == 3 || ctx.Err() != nil {
			if err != nil && !errors.Is(err, stream.ErrInvalid) {
				b.logger.Error("events not stored: the database did not take them", "events", len(evs), "error", err)
				err = fmt.Errorf("store events: %w", err)
			}
			return ps, err
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
		case b.queue <- outgoing{payload: bell}:
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
		user, room := streamTarget(r.Stream)
		if (user == "" && room == "") || !b.hub.hasRecipients(user, room) {
			continue
		}
		if evs := r.Events(); evs != nil {
			b.hub.offer(evs)
		} else {
			b.hub.behind(r.Stream, r.Last)
		}
	}
}
