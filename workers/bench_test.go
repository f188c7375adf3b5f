package workers

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/dbtest"
	"github.com/switchboard/switchboard/jobs"
)

// Benchmarks print figures; they run once per invocation (b.N is ignored):
//
//	go test ./workers/ -run '^$' -bench . -benchtime 1x

type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// benchNode is one worker node on the benchmark's database: River with the
// run worker and a no-op worker, and a claim loop.
type benchNode struct {
	pool    *pgxpool.Pool
	river   *river.Client[pgx.Tx]
	claimer *jobs.Claimer
	owner   string
}

func newBenchNode(b *testing.B) *benchNode {
	ctx := context.Background()
	pool, err := db.Connect(ctx, dbtest.NewDatabaseURL(b), db.Options{MaxConns: 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	cfg, err := RiverConfig(Options{ClientID: uuid.NewString(), DB: pool, Publisher: noopPublisher{}, Logger: dbtest.Logger(b)})
	if err != nil {
		b.Fatal(err)
	}
	river.AddWorker(cfg.Workers, noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Stop(context.Background()) })
	n := &benchNode{pool: pool, river: client, claimer: jobs.NewClaimer(jobs.ClaimerOptions{DB: pool, River: client, BatchSize: 500})}
	n.owner = dbtest.User(b, pool, nil).ID
	return n
}

// createTasks inserts n publish tasks on schedule, due at next.
func (n *benchNode) createTasks(b *testing.B, count int, schedule string, next time.Time) {
	_, err := n.pool.Exec(context.Background(), `
		INSERT INTO tasks (owner_id, name, schedule, action, overlap, signing_secret, next_run_at)
		SELECT $1, 'bench-' || i, $2, '{"type":"publish","event":"bench"}', 'allow', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', $3
		FROM generate_series(1, $4) AS i`, n.owner, schedule, next, count)
	if err != nil {
		b.Fatal(err)
	}
}

func (n *benchNode) count(b *testing.B, sql string, args ...any) int {
	var c int
	if err := n.pool.QueryRow(context.Background(), sql, args...).Scan(&c); err != nil {
		b.Fatal(err)
	}
	return c
}

func waitCount(b *testing.B, n *benchNode, want int, within time.Duration, sql string, args ...any) {
	deadline := time.Now().Add(within)
	for n.count(b, sql, args...) < want {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %d: %s", want, sql)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkDueLag: 1000 tasks @every 1s on one worker node for 10 s; the
// lag from each tick to its run starting, p50 and p99.
func BenchmarkDueLag(b *testing.B) {
	const tasks, measure = 1000, 10 * time.Second
	ctx := context.Background()
	n := newBenchNode(b)
	first := time.Now().Truncate(time.Second).Add(2 * time.Second)
	n.createTasks(b, tasks, "@every 1s", first)
	if err := n.claimer.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer n.claimer.Stop()
	b.ResetTimer()
	// Warm-up second, then the measured window of ticks.
	from, to := first.Add(time.Second), first.Add(time.Second+measure)
	<-time.After(time.Until(to.Add(2 * time.Second)))
	n.claimer.SetPaused(true)
	waitCount(b, n, tasks*int(measure/time.Second), 60*time.Second,
		`SELECT count(*) FROM task_runs WHERE started_at IS NOT NULL AND scheduled_for >= $1 AND scheduled_for < $2`, from, to)
	b.StopTimer()
	var p50, p99, maxLag, claimP50, claimP99 float64
	var runs int
	// lag: tick → run started; claim: tick → run row committed by a claim.
	err := n.pool.QueryRow(ctx, `
		SELECT count(*),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), percentile_cont(0.99) WITHIN GROUP (ORDER BY lag), max(lag),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY claim), percentile_cont(0.99) WITHIN GROUP (ORDER BY claim)
		FROM (SELECT EXTRACT(EPOCH FROM started_at - scheduled_for) * 1000 AS lag,
		             EXTRACT(EPOCH FROM created_at - scheduled_for) * 1000 AS claim
		      FROM task_runs WHERE scheduled_for >= $1 AND scheduled_for < $2) l`, from, to).
		Scan(&runs, &p50, &p99, &maxLag, &claimP50, &claimP99)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(p50, "p50_lag_ms")
	b.ReportMetric(p99, "p99_lag_ms")
	b.ReportMetric(maxLag, "max_lag_ms")
	b.ReportMetric(claimP50, "p50_claim_ms")
	b.ReportMetric(claimP99, "p99_claim_ms")
	b.ReportMetric(float64(runs)/measure.Seconds(), "runs/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkThroughput: raw River no-op jobs/s and end-to-end publish-task
// runs/s (claim, enqueue, work, record, announce) on the same database in
// the same run, one worker node.
func BenchmarkThroughput(b *testing.B) {
	const jobsCount = 5000
	ctx := context.Background()
	n := newBenchNode(b)
	if err := n.claimer.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer n.claimer.Stop()

	// With -count N each sub-benchmark runs N times on this node: counts
	// are taken relative to what earlier rounds left.
	b.Run("river_noop_jobs", func(b *testing.B) {
		const done = `SELECT count(*) FROM river_job WHERE kind = 'bench_noop' AND state = 'completed'`
		base := n.count(b, done)
		params := make([]river.InsertManyParams, jobsCount)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		start := time.Now()
		if _, err := n.river.InsertManyFast(ctx, params); err != nil {
			b.Fatal(err)
		}
		waitCount(b, n, base+jobsCount, time.Minute, done)
		elapsed := time.Since(start)
		b.ReportMetric(jobsCount/elapsed.Seconds(), "jobs/s")
		b.ReportMetric(0, "ns/op")
	})

	b.Run("publish_task_runs", func(b *testing.B) {
		const done = `SELECT count(*) FROM task_runs WHERE status = 'succeeded'`
		base := n.count(b, done)
		n.createTasks(b, jobsCount, "@every 1h", time.Now().Add(-100*time.Millisecond))
		start := time.Now()
		n.claimer.Notify()
		waitCount(b, n, base+jobsCount, time.Minute, done)
		elapsed := time.Since(start)
		b.ReportMetric(jobsCount/elapsed.Seconds(), "runs/s")
		b.ReportMetric(0, "ns/op")
	})
}
