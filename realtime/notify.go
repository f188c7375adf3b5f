package realtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/switchboard/realtime/stream"
)

// publishLoop is the one goroutine that NOTIFYs: it takes whatever is
// pending and sends it in one round trip, outside any business transaction
// (NOTIFY takes a global lock at commit). When Stop begins it sends what
// is still queued within StopTimeout and drops the rest.
func (b *Bus) publishLoop() {
	stopping, exited := b.base.Stopping(), make(chan struct{})
	defer close(exited)
	ctx := b.giveUpAfterStop(stopping, exited)
	for {
		select {
		case out := <-b.queue:
			b.flush(ctx, b.collect(out))
		case <-stopping:
			select { // the append loop's last doorbells come first
			case <-b.appendsDone:
			case <-ctx.Done():
			}
			for {
				select {
				case out := <-b.queue:
					b.flush(ctx, b.collect(out))
				default:
					return
				}
			}
		}
	}
}

// giveUpAfterStop is a context that ends StopTimeout after stopping is
// closed: flushes and retries in flight then, too, give up in time. It
// also ends when the publish loop has exited.
func (b *Bus) giveUpAfterStop(stopping, exited <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		select {
		case <-stopping:
		case <-exited:
			return
		}
		t := time.NewTimer(b.opts.StopTimeout)
		defer t.Stop()
		select {
		case <-t.C:
		case <-exited:
		}
	}()
	return ctx
}

// collect adds to first whatever else is queued, up to MaxBatch
// notifications; doorbells queued one after the other are joined while
// they fit in one.
func (b *Bus) collect(first outgoing) []outgoing {
	batch := []outgoing{first}
	for len(batch) < b.opts.MaxBatch {
		select {
		case out := <-b.queue:
			batch = b.appendJoined(batch, out)
		default:
			return batch
		}
	}
	return batch
}

// appendJoined appends out to batch, joined to the last doorbell when
// both are doorbells and fit in one.
func (b *Bus) appendJoined(batch []outgoing, out outgoing) []outgoing {
	last := &batch[len(batch)-1]
	if out.doorbell && last.doorbell {
		if joined, ok := stream.JoinDoorbells(b.opts.NodeID, last.payload, out.payload, maxDoorbellBytes); ok {
			last.payload = joined
			return batch
		}
	}
	return append(batch, out)
}

// flush sends a batch, retrying a few times while the database is away;
// after that, or once ctx ends (the stop deadline), the batch is dropped,
// counted and logged. When the database refuses the statement because of
// what one message holds, the batch is split so that only that message is
// dropped.
func (b *Bus) flush(ctx context.Context, batch []outgoing) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := b.notifyWithin(ctx, batch)
		switch {
		case err == nil:
			b.metrics.published.Add(float64(len(batch)))
			b.metrics.batch.Observe(float64(len(batch)))
			return
		case refusedContent(err):
			b.isolate(ctx, batch, err)
			return
		case attempt == 4:
			b.drop(batch, "bus messages dropped: the database did not take them", err)
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			b.drop(batch, "bus messages dropped at shutdown: the database did not take them in time", err)
			return
		}
		backoff *= 2
	}
}

// notifyWithin is notify bounded by 5 s and by ctx.
func (b *Bus) notifyWithin(ctx context.Context, batch []outgoing) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return b.notify(ctx, batch)
}

// isolate sends the halves of a batch the database refused on content: a
// single message it refuses is dropped, the others go out.
func (b *Bus) isolate(ctx context.Context, batch []outgoing, err error) {
	if len(batch) == 1 {
		b.drop(batch, "bus message dropped: the database refused it", err)
		return
	}
	half := len(batch) / 2
	b.flush(ctx, batch[:half])
	b.flush(ctx, batch[half:])
}

func (b *Bus) drop(batch []outgoing, msg string, err error) {
	b.metrics.dropped.Add(float64(len(batch)))
	b.logger.Error(msg, "messages", len(batch), "error", err)
}

// refusedContent reports whether the database refused the statement for
// the data it carried (an invalid or too long payload, a duplicate spill
// id: SQLSTATE classes 22 and 23) rather than for being unavailable.
func refusedContent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")
}

// notify sends a batch in one statement. Spilled bodies are inserted by the
// same statement, so they are committed before any listener is notified.
func (b *Bus) notify(ctx context.Context, batch []outgoing) error {
	payloads := make([]string, len(batch))
	var ids []string
	var bodies [][]byte
	for i, out := range batch {
		payloads[i] = out.payload
		if out.spillID != "" {
			ids = append(ids, out.spillID)
			bodies = append(bodies, out.spillBody)
		}
	}
	var err error
	if len(ids) == 0 {
		_, err = b.opts.Pool.Exec(ctx, `SELECT pg_notify($1, m) FROM unnest($2::text[]) AS m`, Channel, payloads)
	} else {
		// A data-modifying CTE runs even though the query never reads it.
		_, err = b.opts.Pool.Exec(ctx, `
			WITH spilled AS (
				INSERT INTO bus_spill (id, body) SELECT * FROM unnest($3::uuid[], $4::bytea[])
			)
			SELECT pg_notify($1, m) FROM unnest($2::text[]) AS m`, Channel, payloads, ids, bodies)
		if err == nil {
			b.metrics.spilled.Add(float64(len(ids)))
		}
	}
	if err != nil {
		return fmt.Errorf("notify %d bus messages: %w", len(batch), err)
	}
	return nil
}
