package realtime

import (
	"context"
	"time"
)

// Poll-only mode: behind a transaction-mode pooler with no session
// connection to LISTEN on, nothing rings this replica's doorbell. Every
// PollInterval it reads each stream its sockets follow from their last
// delivered offsets (one query for all of them, the same catch-up a LISTEN
// reconnect runs), so stored events from other replicas arrive within one
// interval, once and in order. Ephemeral frames (typing, presence, RPC,
// events for everyone) travel only in notifications: in poll-only mode
// they reach the sockets of the replica that published them and no other.

// pollLoop catches up every PollInterval until ctx ends; up is closed at
// once (nothing to establish).
func (b *Bus) pollLoop(ctx context.Context, up chan<- struct{}) {
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
		}
	}
}

// PollOnly reports whether this bus polls the stream store instead of
// listening.
func (b *Bus) PollOnly() bool { return b.opts.PollOnly }
