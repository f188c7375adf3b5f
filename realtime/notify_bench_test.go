package realtime

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// BenchmarkNotifyCommit measures the NOTIFY commit-lock ceiling of the one
// Postgres every replica shares: C connections commit small transactions
// (one INSERT of a ~60-byte row) as fast as they can for 3 s, each with a
// pg_notify (the doorbell every stored append rings) or without (the
// baseline), while three sessions LISTEN on the channel as three replicas'
// buses do; commits/s at C = 1, 4, 16 and 64. Postgres serialises the commit
// of every transaction that notified (one database-wide lock held while its
// notifications are queued), so the notify rate stops growing with C where
// the baseline keeps growing. The appender sends one doorbell per batch, so
// the events/s ceiling is this commits/s times the batch size.
func BenchmarkNotifyCommit(b *testing.B) {
	const measure = 3 * time.Second
	url := dbtest.NewDatabaseURL(b)
	for _, conns := range []int{1, 4, 16, 64} {
		for _, mode := range []string{"notify", "baseline"} {
			b.Run(fmt.Sprintf("%s/conns=%d", mode, conns), func(b *testing.B) {
				pool, err := db.Connect(context.Background(), url, db.Options{MaxConns: int32(conns)})
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close()
				if _, err := pool.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS bench_notify (id bigserial PRIMARY KEY, body text NOT NULL)`); err != nil {
					b.Fatal(err)
				}
				stop := listeners(b, url, 3)
				n := commitLoop(b, pool, conns, mode == "notify", measure)
				stop()
				b.ReportMetric(float64(n)/measure.Seconds(), "commits/s")
			})
		}
	}
}

// listeners starts n sessions that LISTEN on the benchmark's channel and
// drain it, as three replicas' buses do; stop ends them.
func listeners(b *testing.B, url string, n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `LISTEN bench_notify`); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close(context.Background())
			for {
				if _, err := conn.WaitForNotification(ctx); err != nil {
					return
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// commitLoop runs conns goroutines committing one-row transactions until
// the time is up and returns how many committed.
func commitLoop(b *testing.B, pool *pgxpool.Pool, conns int, notify bool, d time.Duration) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	const body = "0123456789012345678901234567890123456789012345678901234567"
	var committed atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				tx, err := pool.Begin(ctx)
				if err != nil {
					break
				}
				_, err = tx.Exec(ctx, `INSERT INTO bench_notify (body) VALUES ($1)`, body)
				if err == nil && notify {
					_, err = tx.Exec(ctx, `SELECT pg_notify('bench_notify', $1)`, body)
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					_ = tx.Rollback(context.Background())
					if ctx.Err() == nil {
						failed.Store(err)
					}
					break
				}
				committed.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	return committed.Load()
}
