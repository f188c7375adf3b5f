package jobs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime"
)

// BenchmarkClaimRate is how fast replicas turn due ticks into queued runs:
// T publish tasks all due, R claimers (each a replica: its own pool of 10
// and River client, batches of 500) calling ClaimOnce concurrently until
// every tick is claimed (locked with SKIP LOCKED, next_run_at advanced, a
// task_runs row and a River job inserted, in one transaction per batch;
// then each run announced queued through the replica's realtime bus,
// stored in the owner's stream, as a replica's claim loop does); claims/s
// beside raw River inserts of the same number of jobs in batches of 500 by
// R inserters, in the same run.
func BenchmarkClaimRate(b *testing.B) {
	for _, tasks := range []int{1000, 10000} {
		for _, claimers := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("claim/tasks=%d/replicas=%d", tasks, claimers), func(b *testing.B) {
				url := dbtest.NewDatabaseURL(b)
				nodes := claimNodes(b, url, claimers, true)
				createDueTasks(b, nodes[0].pool, tasks)
				var claimed atomic.Int64
				elapsed := concurrently(b, nodes, func(ctx context.Context, n claimNode) (bool, error) {
					c, err := n.claimer.ClaimOnce(ctx)
					claimed.Add(int64(c))
					return c > 0, err
				})
				if got := claimed.Load(); got != int64(tasks) {
					b.Fatalf("claimed %d ticks of %d", got, tasks)
				}
				b.ReportMetric(float64(tasks)/elapsed.Seconds(), "claims/s")
			})
			b.Run(fmt.Sprintf("raw_river_insert/tasks=%d/replicas=%d", tasks, claimers), func(b *testing.B) {
				nodes := claimNodes(b, dbtest.NewDatabaseURL(b), claimers, false)
				var left atomic.Int64
				left.Store(int64(tasks))
				elapsed := concurrently(b, nodes, func(ctx context.Context, n claimNode) (bool, error) {
					k := min(left.Add(-500)+500, 500)
					if k <= 0 {
						return false, nil
					}
					params := make([]river.InsertManyParams, k)
					for i := range params {
						params[i] = river.InsertManyParams{Args: RunArgs{}}
					}
					tx, err := n.pool.Begin(ctx)
					if err != nil {
						return false, err
					}
					defer func() { _ = tx.Rollback(context.Background()) }()
					if _, err := n.river.InsertManyFastTx(ctx, tx, params); err != nil {
						return false, err
					}
					return true, tx.Commit(ctx)
				})
				b.ReportMetric(float64(tasks)/elapsed.Seconds(), "jobs/s")
			})
		}
	}
}

type claimNode struct {
	pool    *pgxpool.Pool
	river   *river.Client[pgx.Tx]
	claimer *Claimer
}

// claimNodes starts n replicas; with announce, each with its realtime bus.
func claimNodes(b *testing.B, url string, n int, announce bool) []claimNode {
	nodes := make([]claimNode, n)
	for i := range nodes {
		pool, err := db.Connect(context.Background(), url, db.Options{MaxConns: 10})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
		if err != nil {
			b.Fatal(err)
		}
		opts := ClaimerOptions{DB: pool, River: client, BatchSize: 500}
		if announce {
			bus := realtime.NewBus(realtime.BusOptions{Pool: pool, Store: realtime.Streams{DB: pool}, Logger: dbtest.Logger(b)})
			if err := bus.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(bus.Stop)
			opts.Announcer = NewAnnouncer(AnnouncerOptions{Publisher: bus})
		}
		nodes[i] = claimNode{pool: pool, river: client, claimer: NewClaimer(opts)}
	}
	return nodes
}

// createDueTasks inserts count active publish tasks, every one due.
func createDueTasks(b *testing.B, pool *pgxpool.Pool, count int) {
	owner := dbtest.User(b, pool, nil).ID
	_, err := pool.Exec(context.Background(), `
		INSERT INTO tasks (owner_id, name, schedule, action, overlap, signing_secret, next_run_at)
		SELECT $1, 'bench-' || i, '@every 1h', '{"type":"publish","event":"bench"}', 'allow', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', now() - interval '1 second'
		FROM generate_series(1, $2) AS i`, owner, count)
	if err != nil {
		b.Fatal(err)
	}
}

// concurrently runs step on every node in a loop until it reports no more
// work, and returns the wall time until the last node finished.
func concurrently(b *testing.B, nodes []claimNode, step func(context.Context, claimNode) (bool, error)) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	start := time.Now()
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				more, err := step(ctx, n)
				if err != nil {
					errs <- err
					return
				}
				if !more {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return elapsed
}
