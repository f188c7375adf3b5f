package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// countingDB counts the statements a store sends.
type countingDB struct {
	DB
	statements atomic.Int64
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.statements.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

// busyRate is 640 per 1.6 s window: shares of up to 20 (1/32).
var busyRate = Rate{PerSecond: 400, Burst: 640}

func TestShares(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("a busy key takes growing shares, never more than the limit", func(t *testing.T) {
		t.Parallel()
		db := &countingDB{DB: dbtest.NewTx(t)}
		c := &clock{t: testStart.Add(10 * time.Millisecond)}
		st := newTestStore(t, db, c)
		l := st.Limiter("busy", busyRate)
		allowed := 0
		for i := range 700 {
			d := l.Allow(ctx, "k")
			if d.Allowed {
				allowed++
				if d.Remaining != 640-1-i {
					t.Fatalf("request %d: remaining %d", i+1, d.Remaining)
				}
			}
		}
		// Shares 1, 8, then 20 each (the most, 1/32): 2 + 31 statements for
		// the first 629, one for the last 11 (the replica asks for no more
		// than it saw left); the 60 over the limit are refused from the
		// counts the last one returned.
		if allowed != 640 || db.statements.Load() != 2+31+1 {
			t.Fatalf("allowed %d in %d statements, want 640 in 34", allowed, db.statements.Load())
		}
		curr, _, err := st.counter.Get("busy:k", testStart, testStart.Add(-testLength))
		if err != nil || curr != 640 {
			t.Fatalf("counted %d (%v)", curr, err)
		}
	})
	t.Run("a share larger than what is left takes what is left", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		c := &clock{t: testStart.Add(10 * time.Millisecond)}
		st := newTestStore(t, tx, c)
		if err := st.counter.IncrementBy("busy:k", testStart, 630); err != nil {
			t.Fatal(err)
		}
		l := st.Limiter("busy", busyRate)
		l.local.grant("busy:k", slotAt(c.now(), l.length), 0, 600, 16) // as if 16 were spent
		l.local.spend("busy:k", slotAt(c.now(), l.length))
		for range 15 {
			l.local.spend("busy:k", slotAt(c.now(), l.length))
		}
		allowed := 0
		for range 20 {
			if l.Allow(ctx, "k").Allowed {
				allowed++
			}
		}
		if allowed != 10 {
			t.Fatalf("allowed %d of the 10 left", allowed)
		}
	})
	t.Run("an unspent share expires with its window", func(t *testing.T) {
		t.Parallel()
		db := &countingDB{DB: dbtest.NewTx(t)}
		c := &clock{t: testStart.Add(10 * time.Millisecond)}
		l := newTestStore(t, db, c).Limiter("busy", busyRate)
		for range 3 { // shares 1, then 8 with 6 left
			l.Allow(ctx, "k")
		}
		c.set(testStart.Add(testLength + 10*time.Millisecond))
		before := db.statements.Load()
		if d := l.Allow(ctx, "k"); !d.Allowed || db.statements.Load() != before+1 {
			t.Fatalf("first request of the next window: %+v, %d statements", d, db.statements.Load()-before)
		}
	})
	t.Run("a small limit is decided request by request", func(t *testing.T) {
		t.Parallel()
		db := &countingDB{DB: dbtest.NewTx(t)}
		l := newTestStore(t, db, &clock{t: testStart}).Limiter("auth", Rate{PerSecond: 40, Burst: 63})
		for range 63 {
			l.Allow(ctx, "k")
		}
		if db.statements.Load() != 63 {
			t.Fatalf("%d statements for 63 requests", db.statements.Load())
		}
	})
}

// TestSharedKeyAcrossReplicas hammers one key from three replicas (a store
// and a pool each) for four windows and prints what the cluster admitted
// against the limit. It checks what must always hold: no window counts more
// than the limit in Postgres, and no replica admits a request Postgres did
// not count. How close the admitted count comes to the limit depends on the
// machine keeping the key busy; BenchmarkSharedKey reports it.
func TestSharedKeyAcrossReplicas(t *testing.T) {
	t.Parallel()
	res := hammerShared(t, dbtest.NewDatabaseURL(t), 0, Rate{PerSecond: 1000, Burst: 1000}, 4, 4)
	t.Logf("three replicas, 4 windows of 1000: admitted %d, counted %d (%.1f %% of the limit) in %d statements",
		res.admitted, res.counted, 100*float64(res.admitted)/float64(res.limit), res.statements)
	if res.admitted > res.counted {
		t.Fatalf("admitted %d, more than the %d counted", res.admitted, res.counted)
	}
	for w, n := range res.perWindow {
		if n > 1000 {
			t.Fatalf("window %v counted %d of 1000", w, n)
		}
	}
}

type sharedResult struct {
	admitted, counted, limit int
	statements               int64
	perWindow                map[time.Time]int
}

// hammerShared runs three replicas on one key for windows whole windows of
// r (from a window start), clients goroutines each, and reads back the
// counts.
func hammerShared(tb testing.TB, url string, share float64, r Rate, windows, clients int) sharedResult {
	tb.Helper()
	ctx := context.Background()
	limit, length := r.Window()
	key := "shared-" + time.Now().Format("150405.000000000")
	var dbs []*countingDB
	var limiters []*Limiter
	for range 3 {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(pool.Close)
		db := &countingDB{DB: pool}
		dbs = append(dbs, db)
		st := NewStore(Options{DB: db, Registry: prometheus.NewRegistry(), Timeout: 5 * time.Second, Share: share})
		limiters = append(limiters, st.Limiter("shared", r))
	}
	start := time.Now().Truncate(length).Add(length)
	end := start.Add(time.Duration(windows) * length)
	time.Sleep(time.Until(start)) // an instant to wait for, not an event
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, l := range limiters {
		for range clients {
			wg.Go(func() {
				for time.Now().Before(end) {
					if d := l.Allow(ctx, key); d.Allowed && d.Source != SourceFallback && time.Now().Before(end) {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	res := sharedResult{admitted: int(admitted.Load()), limit: windows * limit, perWindow: map[time.Time]int{}}
	for _, db := range dbs {
		res.statements += db.statements.Load()
	}
	rows, err := dbs[0].DB.(*pgxpool.Pool).Query(ctx, `SELECT window_start, count FROM rate_limit_counters WHERE key = $1`, "shared:"+key)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var w time.Time
		var n int
		if err := rows.Scan(&w, &n); err != nil {
			tb.Fatal(err)
		}
		res.perWindow[w] = n
		if !w.Before(start) && w.Before(end) {
			res.counted += n
		}
	}
	return res
}

// BenchmarkSharedKey: three replicas (a store and a pool each), four
// clients each, hammer one key of 1 000 per 1 s window for five windows;
// what the cluster admitted against the limit, and the statements it took,
// with shares (the default) and with every request decided in Postgres.
//
//	go test -run '^$' -bench SharedKey ./infra/ratelimit/
func BenchmarkSharedKey(b *testing.B) {
	for _, mode := range []struct {
		name  string
		share float64
	}{{"shares", 0}, {"per-request", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			res := hammerShared(b, dbtest.NewDatabaseURL(b), mode.share, Rate{PerSecond: 1000, Burst: 1000}, 5, 4)
			b.ReportMetric(100*float64(res.admitted)/float64(res.limit), "admitted-%-of-limit")
			b.ReportMetric(float64(res.admitted), "admitted")
			b.ReportMetric(float64(res.limit), "limit")
			b.ReportMetric(float64(res.statements)/float64(max(res.admitted, 1)), "statements/admitted")
			b.ReportMetric(0, "ns/op")
		})
	}
}
