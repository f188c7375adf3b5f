package jobs

import (
	"context"
	"sync"
	"time"
)

// batcher runs the requests of concurrent callers in batches, one
// statement per batch (group commit). A request that finds fewer than
// flushers batches in flight runs a batch at once: it and every request
// queued before it, up to max. Requests arriving while flushers batches
// run wait; the caller whose batch ends hands the lead to the first of
// them, whose batch then takes everything queued meanwhile. Alone, a
// request runs at once and by itself; under load, batches grow to what
// arrives during one statement, and the statements in flight stay at
// flushers however many workers write.
type batcher[In, Out any] struct {
	max      int
	flushers int
	// run performs one batch and returns one result per input, in order.
	run func(ctx context.Context, in []In) []batchResult[Out]

	mu     sync.Mutex
	queue  []*batchCall[In, Out]
	active int // callers leading (running or about to run) a batch
}

type batchResult[Out any] struct {
	out Out
	err error
}

type batchCall[In, Out any] struct {
	in      In
	res     batchResult[Out]
	leading bool          // handed the lead (under batcher.mu)
	lead    chan struct{} // closed: run the next batch
	done    chan struct{} // closed: res is set
}

// batchTimeout bounds one batch statement. A batch serves many callers, so
// it does not stop when one caller's context ends: the callers wait for
// its result (a write that may have happened is never abandoned).
const batchTimeout = 30 * time.Second

// do queues in, and returns its result once a batch has run it.
func (b *batcher[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &batchCall[In, Out]{in: in, lead: make(chan struct{}), done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := b.active < b.flushers
	if lead {
		b.active++
		c.leading = true
	}
	b.mu.Unlock()
	if !lead {
		select {
		case <-c.done:
			// Run by another leader's batch; a lead handed over meanwhile
			// goes on to the next request.
			b.mu.Lock()
			if c.leading {
				b.handOff()
			}
			b.mu.Unlock()
			return c.res.out, c.res.err
		case <-c.lead:
		}
	}
	b.leadUntilDone(ctx, c)
	<-c.done
	return c.res.out, c.res.err
}

// leadUntilDone runs batches from the head of the queue until c's has
// run, then hands the lead on (or gives it up when nothing waits).
func (b *batcher[In, Out]) leadUntilDone(ctx context.Context, c *batchCall[In, Out]) {
	for {
		batch := b.take()
		if len(batch) > 0 {
			b.flush(ctx, batch)
		}
		b.mu.Lock()
		select {
		case <-c.done:
		default:
			if len(batch) > 0 {
				b.mu.Unlock()
				continue
			}
			// c is in a batch another leader runs: wait for it there.
		}
		b.handOff()
		b.mu.Unlock()
		return
	}
}

// take removes the next batch from the queue.
func (b *batcher[In, Out]) take() []*batchCall[In, Out] {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.queue), b.max)
	batch := make([]*batchCall[In, Out], n)
	copy(batch, b.queue)
	b.queue = append(b.queue[:0:0], b.queue[n:]...)
	return batch
}

// handOff passes this caller's lead to the first queued request not
// leading yet, or releases it. b.mu is held.
func (b *batcher[In, Out]) handOff() {
	for _, next := range b.queue {
		if !next.leading {
			next.leading = true
			close(next.lead)
			return
		}
	}
	b.active--
}

func (b *batcher[In, Out]) flush(ctx context.Context, batch []*batchCall[In, Out]) {
	ins := make([]In, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	res := b.run(fctx, ins)
	cancel()
	for i, c := range batch {
		c.res = res[i]
		close(c.done)
	}
}
