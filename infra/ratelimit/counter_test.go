package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

const testLength = 1600 * time.Millisecond

// testStart is a window start in the future, so tests never meet real
// traffic's windows.
var testStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Truncate(testLength)

func mustTake(t *testing.T, c *Counter, key string, s slot, limit int) taken {
	t.Helper()
	res, err := c.take(context.Background(), key, s, limit, 1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestCounterTake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("burst then refused, refusals not counted", func(t *testing.T) {
		t.Parallel()
		c := NewCounter(dbtest.NewTx(t), 0)
		s := slotAt(testStart.Add(100*time.Millisecond), testLength)
		for i := range 8 {
			if res := mustTake(t, c, "burst", s, 8); !res.ok || res.curr != i || res.prev != 0 {
				t.Fatalf("request %d: %+v", i+1, res)
			}
		}
		for range 3 {
			if res := mustTake(t, c, "burst", s, 8); res.ok || res.curr != 8 {
				t.Fatalf("over the burst: %+v", res)
			}
		}
		curr, prev, err := c.Get("burst", s.current, s.previous)
		if err != nil || curr != 8 || prev != 0 {
			t.Fatalf("stored counts %d %d %v", curr, prev, err)
		}
	})
	t.Run("previous window weighs by the elapsed fraction", func(t *testing.T) {
		t.Parallel()
		c := NewCounter(dbtest.NewTx(t), 0)
		if err := c.IncrementBy("fade", testStart.Add(-testLength), 8); err != nil {
			t.Fatal(err)
		}
		// Half way: 8*0.5 = 4 still count, so 4 more fit (round(4+3)+1 = 8).
		s := slotAt(testStart.Add(testLength/2), testLength)
		allowed := 0
		for range 8 {
			if res := mustTake(t, c, "fade", s, 8); res.ok {
				allowed++
			} else if res.prev != 8 || res.curr != 4 {
				t.Fatalf("refusal reports %+v", res)
			}
		}
		if allowed != 4 {
			t.Fatalf("allowed %d half way through, want 4", allowed)
		}
	})
	t.Run("keys do not share", func(t *testing.T) {
		t.Parallel()
		c := NewCounter(dbtest.NewTx(t), 0)
		s := slotAt(testStart, testLength)
		mustTake(t, c, "a", s, 1)
		if res := mustTake(t, c, "a", s, 1); res.ok {
			t.Fatal("a over its limit")
		}
		if res := mustTake(t, c, "b", s, 1); !res.ok {
			t.Fatal("b limited by a")
		}
	})
	t.Run("concurrent decisions on one key never overshoot", func(t *testing.T) {
		t.Parallel()
		c := NewCounter(dbtest.NewPool(t), 0)
		s := slotAt(testStart, testLength)
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for range 5 {
					res, err := c.take(ctx, "race", s, 25, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if res.ok {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		curr, _, err := c.Get("race", s.current, s.previous)
		if allowed.Load() != 25 || curr != 25 || err != nil {
			t.Fatalf("allowed %d, stored %d (%v), want 25", allowed.Load(), curr, err)
		}
	})
	t.Run("behind httprate's limiter", func(t *testing.T) {
		t.Parallel()
		c := NewCounter(dbtest.NewPool(t), 0)
		rl := httprate.NewRateLimiter(3, time.Minute, httprate.WithLimitCounter(c))
		for i := range 4 {
			ok, _, err := rl.Status("httprate")
			if err != nil || ok != (i < 4) {
				t.Fatalf("status %v %v", ok, err)
			}
			if err := c.Increment("httprate", time.Now().UTC().Truncate(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		if ok, rate, _ := rl.Status("httprate"); ok || rate <= 3 {
			t.Fatalf("after 4 of 3: ok %v rate %v", ok, rate)
		}
	})
	t.Run("prune deletes old windows only", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		c := NewCounter(tx, 0)
		for i := range 5 {
			if err := c.Increment("prune", testStart.Add(time.Duration(i)*testLength)); err != nil {
				t.Fatal(err)
			}
		}
		n, err := Prune(ctx, tx, testStart.Add(3*testLength))
		if err != nil || n != 3 {
			t.Fatalf("pruned %d (%v), want 3", n, err)
		}
		curr, prev, _ := c.Get("prune", testStart.Add(4*testLength), testStart.Add(3*testLength))
		if curr != 1 || prev != 1 {
			t.Fatalf("recent windows gone: %d %d", curr, prev)
		}
	})
}
