package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// clock is a settable time source shared by the stores of one test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var apiRate = Rate{PerSecond: 5, Burst: 8}

// newTestStore is a store that waits for Postgres as long as a loaded
// machine may need (the fallback's tests set their own timeout).
func newTestStore(t *testing.T, db DB, c *clock) *Store {
	t.Helper()
	return newStoreWithTimeout(t, db, c, time.Minute)
}

func newStoreWithTimeout(t *testing.T, db DB, c *clock, timeout time.Duration) *Store {
	t.Helper()
	s := NewStore(Options{DB: db, Registry: prometheus.NewRegistry(), ProbeInterval: 20 * time.Millisecond, Timeout: timeout})
	if c != nil {
		s.now = c.now
	}
	return s
}

func requireDecision(t *testing.T, d Decision, allowed bool, remaining int, source string) {
	t.Helper()
	if d.Allowed != allowed || d.Remaining != remaining || d.Source != source || d.Limit != 8 {
		t.Fatalf("decision %+v, want allowed %v remaining %d from %s", d, allowed, remaining, source)
	}
	if !allowed && d.RetryAfter < time.Second {
		t.Fatalf("refusal without Retry-After: %+v", d)
	}
}

func TestLimiter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("burst, then refused from what Postgres said", func(t *testing.T) {
		t.Parallel()
		c := &clock{t: testStart.Add(10 * time.Millisecond)}
		l := newTestStore(t, dbtest.NewTx(t), c).Limiter("auth", apiRate)
		for i := range 8 {
			d := l.Allow(ctx, "203.0.113.1")
			requireDecision(t, d, true, 7-i, SourcePostgres)
			if !d.Reset.Equal(testStart.Add(testLength)) {
				t.Fatalf("reset %v", d.Reset)
			}
		}
		requireDecision(t, l.Allow(ctx, "203.0.113.1"), false, 0, SourceCache)
		requireDecision(t, l.Allow(ctx, "203.0.113.2"), true, 7, SourcePostgres)
		// Sustained: a window later the previous 8 weigh 15/16: room for none;
		// 0.1 s in (1/16 + rounding): room for one.
		c.set(testStart.Add(testLength + 50*time.Millisecond))
		requireDecision(t, l.Allow(ctx, "203.0.113.1"), false, 0, SourceCache)
		c.set(testStart.Add(testLength + 110*time.Millisecond))
		requireDecision(t, l.Allow(ctx, "203.0.113.1"), true, 0, SourcePostgres)
	})
	t.Run("replicas share one limit", func(t *testing.T) {
		t.Parallel()
		c := &clock{t: testStart}
		pool := dbtest.NewPool(t)
		a := newTestStore(t, pool, c).Limiter("auth", apiRate)
		b := newTestStore(t, pool, c).Limiter("auth", apiRate)
		for i := range 8 {
			l := a
			if i%2 == 1 {
				l = b
			}
			if d := l.Allow(ctx, "ip"); !d.Allowed {
				t.Fatalf("request %d refused: %+v", i+1, d)
			}
		}
		for _, l := range []*Limiter{a, b} {
			if d := l.Allow(ctx, "ip"); d.Allowed {
				t.Fatalf("ninth request allowed: %+v", d)
			}
		}
	})
	t.Run("limiters of one store do not share keys", func(t *testing.T) {
		t.Parallel()
		st := newTestStore(t, dbtest.NewTx(t), &clock{t: testStart})
		one := st.Limiter("one", Rate{PerSecond: 1, Burst: 1})
		two := st.Limiter("two", Rate{PerSecond: 1, Burst: 1})
		if !one.Allow(ctx, "k").Allowed || !two.Allow(ctx, "k").Allowed || one.Allow(ctx, "k").Allowed {
			t.Fatal("limiters share counts")
		}
	})
}

func TestFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	const timeout = 2 * time.Second
	st := newStoreWithTimeout(t, pool, nil, timeout)
	l := st.Limiter("auth", Rate{PerSecond: 8.0 / 60, Burst: 8}) // one-minute windows: no boundary mid-test

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "LOCK TABLE rate_limit_counters IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	allowed := 0
	for range 12 {
		d := l.Allow(ctx, "locked")
		if d.Source != SourceFallback {
			t.Fatalf("decision while locked came from %s", d.Source)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 8 {
		t.Fatalf("fallback allowed %d of 12, want the burst of 8", allowed)
	}
	// Waiting for Postgres, they would take 12 timeouts; only the first
	// waits.
	if took := time.Since(start); took > 6*timeout {
		t.Fatalf("12 decisions took %v: every request waited for Postgres", took)
	}
	if !st.FallingBack() || testutil.ToFloat64(st.metrics.active) != 1 || testutil.ToFloat64(st.metrics.fallback.WithLabelValues("auth")) != 12 {
		t.Fatal("fallback not reported in metrics")
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.FallingBack() {
		if time.Now().After(deadline) {
			t.Fatal("still falling back 10 s after the lock was released")
		}
		l.Allow(ctx, "prober") // decisions start probes
		time.Sleep(5 * time.Millisecond)
	}
	if testutil.ToFloat64(st.metrics.active) != 0 {
		t.Fatal("gauge still says fallback")
	}
	if d := l.Allow(ctx, "after"); d.Source != SourcePostgres || !d.Allowed {
		t.Fatalf("after recovery: %+v", d)
	}
}

func TestCancelledRequestDoesNotFallBack(t *testing.T) {
	t.Parallel()
	st := newTestStore(t, dbtest.NewTx(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d := st.Limiter("auth", apiRate).Allow(ctx, "gone"); !d.Allowed {
		t.Fatalf("decision %+v", d)
	}
	if st.FallingBack() {
		t.Fatal("a client that went away switched the store to its fallback")
	}
}

var _ DB = pgx.Tx(nil)

func TestHotKey(t *testing.T) {
	t.Parallel()
	st := newTestStore(t, dbtest.NewPool(t), &clock{t: testStart})
	l := st.Limiter("auth", apiRate)
	var wg sync.WaitGroup
	var mu sync.Mutex
	sources := map[string]int{}
	allowed := 0
	for range 30 {
		wg.Go(func() {
			d := l.Allow(context.Background(), "hot")
			mu.Lock()
			defer mu.Unlock()
			sources[d.Source]++
			if d.Allowed {
				allowed++
			}
		})
	}
	wg.Wait()
	// One statement per allowed request; the requests queued behind the
	// eighth are refused from its answer.
	if allowed != 8 || sources[SourcePostgres] != 8 || sources[SourceCache] != 22 {
		t.Fatalf("allowed %d, sources %v", allowed, sources)
	}
}

func TestKeysDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	l := newLocal(time.Second)
	unlockA, err := l.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	unlockB, err := l.lock(short, "b")
	if err != nil {
		t.Fatalf("b waited for a: %v", err)
	}
	unlockB()
	if _, err := l.lock(short, "a"); err == nil {
		t.Fatal("a second decision on a did not wait")
	}
	unlockA()
	unlockA2, err := l.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockA2()
	for i := range l.shards {
		if n := len(l.shards[i].inflight); n != 0 {
			t.Fatalf("shard %d keeps %d key locks", i, n)
		}
	}
}

func TestNoDatabaseStillLimits(t *testing.T) {
	t.Parallel()
	st := newTestStore(t, nil, &clock{t: testStart})
	l := st.Limiter("auth", apiRate)
	allowed := 0
	for range 10 {
		d := l.Allow(context.Background(), "k")
		if d.Source != SourceFallback {
			t.Fatalf("source %s without a database", d.Source)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 8 {
		t.Fatalf("allowed %d of 10", allowed)
	}
}
