package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Poll-only mode: behind a transaction-mode pooler with no session
// connection to LISTEN on, nothing rings this replica's doorbell. Every
// PollInterval it
//   - reads each stream its sockets follow from their last delivered
//     offsets (one query for all of them, the catch-up a LISTEN reconnect
//     runs), so stored events from other replicas arrive within one
//     interval, once and in order;
//   - reads the bus messages other replicas wrote to bus_spill since the
//     last poll: in poll-only mode every bus message (ephemeral frames,
//     RPC calls and answers) is spilled, its NOTIFY carrying only a stub,
//     so that a replica that cannot LISTEN finds it there. A message is
//     acted on at most once, like a notification.

// pollLookback is how far before the newest row seen each poll reads
// again: created_at is the time the sending statement began, and a row
// that began earlier may commit later than one already read.
const pollLookback = 5 * time.Second

// spillPoller remembers which bus_spill rows were handled.
type spillPoller struct {
	since time.Time            // the newest created_at seen
	seen  map[string]time.Time // ids handled, kept for pollLookback
}

// pollLoop polls every PollInterval until ctx ends; up is closed once the
// first poll of bus_spill has its starting point.
func (b *Bus) pollLoop(ctx context.Context, up chan<- struct{}) {
	p := &spillPoller{seen: map[string]time.Time{}}
	for p.since.IsZero() {
		if err := b.opts.Pool.QueryRow(ctx, `SELECT now()`).Scan(&p.since); err != nil {
			b.listen.set(false, fmt.Errorf("poll: %w", err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(b.opts.PollInterval):
			}
		}
	}
	b.listen.set(true, nil)
	close(up)
	t := time.NewTicker(b.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.listen.set(false, ErrStopped)
			return
		case <-t.C:
			b.hub.catchUp()
			if err := b.pollSpill(ctx, p); err != nil && ctx.Err() == nil {
				b.logger.Warn("poll-only: reading bus messages failed; retrying", "error", err)
			}
		}
	}
}

// pollSpill acts on the bus messages written since the last poll.
func (b *Bus) pollSpill(ctx context.Context, p *spillPoller) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := b.opts.Pool.Query(ctx, `SELECT id::text, body, created_at FROM bus_spill
		WHERE created_at > $1 ORDER BY created_at`, p.since.Add(-pollLookback))
	if err != nil {
		return fmt.Errorf("read bus_spill: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var body []byte
		var at time.Time
		if err := rows.Scan(&id, &body, &at); err != nil {
			return fmt.Errorf("read bus_spill: %w", err)
		}
		if _, done := p.seen[id]; done {
			continue
		}
		p.seen[id] = at
		p.since = maxTime(p.since, at)
		b.receivePolled(body)
	}
	for id, at := range p.seen {
		if at.Before(p.since.Add(-pollLookback)) {
			delete(p.seen, id)
		}
	}
	return rows.Err()
}

// receivePolled handles one spilled message from bus_spill as receive
// handles a notification.
func (b *Bus) receivePolled(body []byte) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		b.logger.Warn("bus: unreadable spilled message", "error", err)
		return
	}
	if env.Origin == b.opts.NodeID || !b.forThisNode(env) {
		return
	}
	b.metrics.received.Inc()
	b.dispatch(env)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// PollOnly reports whether this bus polls instead of listening.
func (b *Bus) PollOnly() bool { return b.opts.PollOnly }
