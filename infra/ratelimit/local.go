package ratelimit

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// local is one replica's view of a limiter's counters, used two ways:
//
//   - While Postgres answers, it remembers the counts Postgres returned. They
//     only grow within a window, so they are a lower bound of the cluster's
//     counts: a request they already refuse is refused without a round trip
//     (a client hammering a limit costs no database work), and a request they
//     allow is decided by Postgres.
//   - While Postgres does not answer, it is the fallback counter (same
//     algorithm, per replica), starting from what it last knew.
//
// It also queues one replica's decisions on one key (lock), so a hot key
// keeps at most one database connection busy per replica, and the requests
// queued behind a refusal are refused from its counts. It is sharded so that
// requests on different keys rarely share a mutex (held for map operations
// only, never across I/O) and never wait for each other.
type local struct {
	length time.Duration
	seed   maphash.Seed
	shards [32]localShard
}

type localShard struct {
	mu       sync.Mutex
	counts   map[string]*localCount
	inflight map[string]*keyLock
	swept    time.Time
}

// keyLock is held by the decision in progress on a key; waiters hold refs.
type keyLock struct {
	sem  chan struct{}
	refs int
}

// localCount holds a key's counts in window and the window before it, and
// this replica's share of the window (lease): requests Postgres already
// counted in curr that this replica has not spent yet.
type localCount struct {
	window     time.Time
	prev, curr int
	lease      lease
}

// lease is a share of a key's current window taken from Postgres in one
// statement and spent locally. Left tokens expire with the window (they are
// counted there, so the cluster never admits more than the limit; a share
// left unspent only refuses that much early). size is the last share taken;
// spent counts the requests decided from it.
type lease struct {
	left, size, spent int
}

func newLocal(length time.Duration) *local {
	l := &local{length: length, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].counts = map[string]*localCount{}
		l.shards[i].inflight = map[string]*keyLock{}
	}
	return l
}

// at returns the counts of the previous and current windows of s.
func (c *localCount) at(s slot) (prev, curr int) {
	switch {
	case c.window.Equal(s.current):
		return c.prev, c.curr
	case c.window.Equal(s.previous):
		return c.curr, 0
	}
	return 0, 0
}

// moveTo shifts c into s's current window; a share of an earlier window
// expires.
func (c *localCount) moveTo(s slot) {
	if !c.window.Equal(s.current) {
		c.lease.left = 0
	}
	c.prev, c.curr = c.at(s)
	c.window = s.current
}

func (l *local) shard(key string) *localShard {
	return &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
}

// lock waits until no other decision on key is in progress on this
// replica; unlock when done.
func (l *local) lock(ctx context.Context, key string) (unlock func(), err error) {
	sh := l.shard(key)
	sh.mu.Lock()
	kl, ok := sh.inflight[key]
	if !ok {
		kl = &keyLock{sem: make(chan struct{}, 1)}
		sh.inflight[key] = kl
	}
	kl.refs++
	sh.mu.Unlock()
	release := func() {
		sh.mu.Lock()
		if kl.refs--; kl.refs == 0 {
			delete(sh.inflight, key)
		}
		sh.mu.Unlock()
	}
	select {
	case kl.sem <- struct{}{}:
		return func() { <-kl.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// peek returns what this replica knows of key's counts.
func (l *local) peek(key string, s slot) (prev, curr int) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c, ok := sh.counts[key]; ok {
		return c.at(s)
	}
	return 0, 0
}

// observe merges counts read from Postgres.
func (l *local) observe(key string, s slot, prev, curr int) {
	l.update(key, s, func(c *localCount, cs slot) {
		if cs.current.Equal(s.current) {
			c.prev, c.curr = max(c.prev, prev), max(c.curr, curr)
		}
	})
}

// spend decides a request from this replica's share of key's window, if
// any is left. It returns the counts before the request as the cluster saw
// them when the share was taken, less the share's unspent part.
func (l *local) spend(key string, s slot) (prev, curr int, ok bool) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, found := sh.counts[key]
	if !found || !c.window.Equal(s.current) || c.lease.left == 0 {
		return 0, 0, false
	}
	prev, curr = c.prev, c.curr-c.lease.left
	c.lease.left--
	c.lease.spent++
	return prev, curr, true
}

// shareSize is how many requests to ask Postgres for the next time key's
// share runs out: eight times the last share if it was all spent (a busy
// key), else half of it (it expired with its window partly unspent), never
// more than most.
func (l *local) shareSize(key string, most int) int {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, ok := sh.counts[key]
	if !ok || c.lease.size == 0 {
		return 1
	}
	n := max(c.lease.size/2, c.lease.spent, 1)
	if c.lease.spent == c.lease.size {
		n = growth * c.lease.size
	}
	return min(n, max(most, 1))
}

// growth is how much faster than its last share a busy key asks for: a key
// reaches a share of a thousand in four statements.
const growth = 8

// grant records a share of n requests taken from Postgres, with the counts
// before it; the first of them is spent at once by the request that asked.
func (l *local) grant(key string, s slot, prev, curr, n int) {
	l.update(key, s, func(c *localCount, cs slot) {
		if !cs.current.Equal(s.current) {
			return // a later window already started here: the share is stale
		}
		c.prev, c.curr = max(c.prev, prev), max(c.curr, curr+n)
		c.lease = lease{left: n - 1, size: n, spent: 1}
	})
}

// take is the fallback decision: n more requests are counted if they fit.
// It returns the counts before them.
func (l *local) take(key string, s slot, limit, n int) (prev, curr int, ok bool) {
	l.update(key, s, func(c *localCount, s slot) {
		prev, curr = c.prev, c.curr
		if ok = allows(s.rate(prev, curr), n, limit); ok {
			c.curr += n
		}
	})
	return prev, curr, ok
}

// update runs fn on key's counts moved to s's window. A request that lost a
// race with one in a later window is counted in that window, at its start
// (the strictest moment), rather than resetting it.
func (l *local) update(key string, s slot, fn func(*localCount, slot)) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.sweep(s)
	c, ok := sh.counts[key]
	switch {
	case !ok:
		c = &localCount{window: s.current}
		sh.counts[key] = c
	case c.window.After(s.current):
		s = slotAt(c.window, l.length)
	}
	c.moveTo(s)
	fn(c, s)
}

// sweep forgets keys idle for two windows, at most once per window.
func (sh *localShard) sweep(s slot) {
	if s.now.Sub(sh.swept) < s.length {
		return
	}
	sh.swept = s.now
	for k, c := range sh.counts {
		if c.window.Before(s.previous) {
			delete(sh.counts, k)
		}
	}
}
