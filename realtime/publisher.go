package realtime

import (
	"context"
	"fmt"
	"time"
)

// publishLoop is the one goroutine that NOTIFYs: it takes whatever is
// pending and sends it in one round trip, outside any business transaction
// (NOTIFY takes a global lock at commit).
func (b *Bus) publishLoop() {
	defer b.wg.Done()
	for {
		select {
		case out := <-b.queue:
			b.flush(b.collect(out))
		case <-b.stopping:
			for {
				select {
				case out := <-b.queue:
					b.flush(b.collect(out))
				default:
					return
				}
			}
		}
	}
}

// collect adds to first whatever else is queued, up to MaxBatch.
func (b *Bus) collect(first outgoing) []outgoing {
	batch := []outgoing{first}
	for len(batch) < b.opts.MaxBatch {
		select {
		case out := <-b.queue:
			batch = append(batch, out)
		default:
			return batch
		}
	}
	return batch
}

// flush sends a batch, retrying a few times while the database is away;
// after that the batch is dropped, counted and logged.
func (b *Bus) flush(batch []outgoing) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := b.notify(ctx, batch)
		cancel()
		if err == nil {
			b.metrics.published.Add(float64(len(batch)))
			b.metrics.batch.Observe(float64(len(batch)))
			return
		}
		if attempt == 4 {
			b.metrics.dropped.Add(float64(len(batch)))
			b.logger.Error("bus messages dropped: the database did not take them", "messages", len(batch), "error", err)
			return
		}
		select {
		case <-time.After(backoff):
		case <-b.stopping:
			if attempt >= 2 {
				b.metrics.dropped.Add(float64(len(batch)))
				b.logger.Error("bus messages dropped at shutdown", "messages", len(batch), "error", err)
				return
			}
		}
		backoff *= 2
	}
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
