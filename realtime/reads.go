package realtime

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/switchboard/switchboard/realtime/stream"
)

// headOnly is the position a read asks from when it wants only a stream's
// head (epoch and last offset): nothing is after it.
const headOnly = math.MaxInt64 / 2

// Reads of the store are coalesced per stream: any number of requests for
// a stream before the read starts become one cursor, from the lowest
// position asked for, and every pending stream goes into one ReadMany.
// A read of few streams (a resume, a socket's gap) takes up to
// readEventsFew events of each, so that a client resuming from the oldest
// retained event is caught up in one round trip; a larger one up to
// readEventsPerStream each.
const (
	readStreamsPerQuery = 1000
	readEventsPerStream = 500
	readFewStreams      = 50
	readEventsFew       = 1000
)

// readLimit is how many events of each stream a read of n streams takes.
func readLimit(n int) int {
	if n <= readFewStreams {
		return readEventsFew
	}
	return readEventsPerStream
}

// reads is the hub's queue of streams to read; one goroutine drains it
// while there is something to read.
type reads struct {
	mu      sync.Mutex
	due     map[string]int64 // stream -> read after this offset
	seq     uint64           // reads taken so far
	running bool
	wg      sync.WaitGroup
}

// requestRead asks for name to be read after offset since (-1: its head
// only) and returns the number of reads taken so far: reads numbered above
// it see everything committed before this call.
func (h *Hub) requestRead(name string, since int64) uint64 {
	r := &h.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.opts.Store == nil {
		return r.seq
	}
	if since < 0 {
		since = headOnly
	}
	if cur, ok := r.due[name]; !ok || since < cur {
		r.due[name] = since
	}
	if !r.running && h.ctx.Err() == nil {
		r.running = true
		r.wg.Add(1)
		go h.readLoop()
	}
	return r.seq
}

// readLoop reads what is due until nothing is; on a database error it
// retries every second until the hub shuts down.
func (h *Hub) readLoop() {
	defer h.reads.wg.Done()
	for {
		cursors, seq := h.reads.take(h.ctx)
		if cursors == nil {
			return
		}
		ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		hs, err := h.opts.Store.ReadMany(ctx, cursors, readLimit(len(cursors)))
		cancel()
		if err == nil {
			err = h.guardReads(hs) // room_access.go
		}
		if err == nil {
			err = h.guardProjectReads(hs) // project_access.go
		}
		if err != nil {
			if h.ctx.Err() != nil {
				h.reads.stop()
				return
			}
			h.logger.Warn("reading streams for local sockets failed; retrying", "streams", len(cursors), "error", err)
			h.reads.putBack(cursors)
			select {
			case <-time.After(time.Second):
			case <-h.ctx.Done():
			}
			continue
		}
		h.metrics.reads.Inc()
		for _, hist := range hs {
			h.applyRead(hist, seq)
		}
	}
}

// take takes up to readStreamsPerQuery due streams as one read; nil (and
// the loop ends) when none are due or ctx, the hub's, ended.
func (r *reads) take(ctx context.Context) ([]stream.Cursor, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.due) == 0 || ctx.Err() != nil {
		r.running = false
		return nil, 0
	}
	cursors := make([]stream.Cursor, 0, min(len(r.due), readStreamsPerQuery))
	for name, since := range r.due {
		if len(cursors) == readStreamsPerQuery {
			break
		}
		cursors = append(cursors, stream.Cursor{Stream: name, Since: since})
		delete(r.due, name)
	}
	r.seq++
	return cursors, r.seq
}

// putBack makes the streams of a failed read due again.
func (r *reads) putBack(cursors []stream.Cursor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cursors {
		if cur, ok := r.due[c.Stream]; !ok || c.Since < cur {
			r.due[c.Stream] = c.Since
		}
	}
}

// stop marks the loop ended.
func (r *reads) stop() {
	r.mu.Lock()
	r.running = false
	r.mu.Unlock()
}
