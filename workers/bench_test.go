package workers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/realtime"
)

// Benchmarks print figures; they run once per invocation (b.N is ignored),
// each on a fresh database; run them three times:
//
//	go test ./workers/ -run '^$' -bench . -benchtime 1x -count 3

type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// benchNode is one worker node on the benchmark's database: River with the
// run worker and a no-op worker, a claim loop, and the realtime bus both
// announce runs through. Pool and worker counts are the defaults a replica
// runs with (the pool sized as db.Connect sizes it, River's queue as
// RiverConfig sizes it, the claim loop's batches).
type benchNode struct {
	pool    *pgxpool.Pool
	river   *river.Client[pgx.Tx]
	claimer *jobs.Claimer
	owner   string
	pub     *benchPublisher
}

// benchPublisher is what a worker-only replica publishes through: the
// realtime bus as the app wires it (no hub), which stores every event in
// its stream (a run's task.run.* announcements and a publish action's
// event, in the owner's user stream) and rings the doorbell. While silent
// it drops everything: what a run costs without its events.
type benchPublisher struct {
	bus    *realtime.Bus
	silent atomic.Bool
}

func (p *benchPublisher) PublishUser(ctx context.Context, user, event string, payload any) error {
	if p.silent.Load() {
		return nil
	}
	return p.bus.PublishUser(ctx, user, event, payload)
}

func (p *benchPublisher) PublishProject(ctx context.Context, project, event string, payload any) error {
	if p.silent.Load() {
		return nil
	}
	return p.bus.PublishProject(ctx, project, event, payload)
}

func (p *benchPublisher) PublishRoom(ctx context.Context, room, event string, payload any) error {
	if p.silent.Load() {
		return nil
	}
	return p.bus.PublishRoom(ctx, room, event, payload)
}

// teePublisher tells first, then the node's publisher, of each claim.
type teePublisher struct {
	first jobs.Publisher
	then  *benchPublisher
}

func (t teePublisher) PublishProject(ctx context.Context, project, event string, payload any) error {
	_ = t.first.PublishProject(ctx, project, event, payload)
	return t.then.PublishProject(ctx, project, event, payload)
}

// benchPoolSize is the pool of a replica with default settings.
const benchPoolSize = 25

// newBenchNode starts a node; claimed, when not nil, is told of each claim
// (the run announced queued) before the bus is.
func newBenchNode(b *testing.B, claimed jobs.Publisher) *benchNode {
	ctx := context.Background()
	pool, err := db.Connect(ctx, dbtest.NewDatabaseURL(b), db.Options{MaxConns: benchPoolSize})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	bus := realtime.NewBus(realtime.BusOptions{Pool: pool, Store: realtime.Streams{DB: pool}, Logger: dbtest.Logger(b)})
	if err := bus.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bus.Stop)
	pub := &benchPublisher{bus: bus}
	var announce jobs.Publisher = pub
	if claimed != nil {
		announce = teePublisher{first: claimed, then: pub}
	}
	cfg, err := RiverConfig(Options{ClientID: uuid.NewString(), DB: pool, Publisher: pub, Logger: dbtest.Logger(b),
		Webhook: WebhookOptions{AllowPrivate: true}})
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
	n := &benchNode{pool: pool, river: client, pub: pub,
		claimer: jobs.NewClaimer(jobs.ClaimerOptions{DB: pool, River: client, Announcer: jobs.NewAnnouncer(jobs.AnnouncerOptions{Publisher: announce}), Pacing: jobs.Pacing{Lead: benchLead(b)}})}
	n.owner = dbtest.User(b, pool, nil).ID
	return n
}

// benchLead is the claim lead of a replica with default settings
// (SWITCHBOARD_CLAIM_LEAD), or BENCH_CLAIM_LEAD when set (0: off), to
// compare in one sitting.
func benchLead(b *testing.B) time.Duration {
	v, ok := os.LookupEnv("BENCH_CLAIM_LEAD")
	if !ok {
		return 500 * time.Millisecond
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("BENCH_CLAIM_LEAD: %v", err)
	}
	return d
}

// createTasks inserts count tasks with action on schedule, due at next.
func (n *benchNode) createTasks(b *testing.B, count int, schedule, action string, next time.Time) {
	_, err := n.pool.Exec(context.Background(), `
		INSERT INTO tasks (owner_id, name, schedule, action, overlap, signing_secret, next_run_at)
		SELECT $1, 'bench-' || i, $2, $5, 'allow', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', $3
		FROM generate_series(1, $4) AS i`, n.owner, schedule, next, count, action)
	if err != nil {
		b.Fatal(err)
	}
}

const publishAction = `{"type":"publish","event":"bench"}`

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

// claimClock notes when each run was announced queued: right after the
// claim that made it committed.
type claimClock struct {
	mu sync.Mutex
	at map[string]time.Time // run id → announced
}

func (c *claimClock) PublishProject(_ context.Context, _, _ string, payload any) error {
	if r, ok := payload.(jobs.Run); ok {
		c.mu.Lock()
		c.at[r.ID] = time.Now()
		c.mu.Unlock()
	}
	return nil
}

// lags returns the p50, p99 and max of the lags in milliseconds.
func lags(ms []float64) (p50, p99, most float64) {
	slices.Sort(ms)
	at := func(q float64) float64 { return ms[min(len(ms)-1, int(q*float64(len(ms))))] }
	return at(0.5), at(0.99), ms[len(ms)-1]
}

// BenchmarkDueLag: 1000 tasks @every 1s on one worker node for 10 s; for
// every tick, the lag to its run being claimed (the claim committed: the
// run announced queued) and to its run starting (started_at), p50, p99 and
// max of each. The node claims ahead as a default replica does
// (SWITCHBOARD_CLAIM_LEAD): a negative claim lag is a tick claimed that long
// before it was due. BENCH_CLAIM_LEAD=0 measures claiming once due.
func BenchmarkDueLag(b *testing.B) {
	const tasks, measure = 1000, 10 * time.Second
	ctx := context.Background()
	clock := &claimClock{at: map[string]time.Time{}}
	n := newBenchNode(b, clock)
	first := time.Now().Truncate(time.Second).Add(2 * time.Second)
	n.createTasks(b, tasks, "@every 1s", publishAction, first)
	if err := n.claimer.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer n.claimer.Stop()
	b.ResetTimer()
	// Warm-up second, then the measured window of ticks.
	from, to := first.Add(time.Second), first.Add(time.Second+measure)
	<-time.After(time.Until(to))
	// Every tick of the window claimed (a node that falls behind by more
	// than CatchUp folds ticks: fewer runs/s), then every run started.
	waitCount(b, n, tasks, 2*time.Minute, `SELECT count(*) FROM tasks WHERE next_run_at >= $1`, to)
	n.claimer.SetPaused(true)
	runs := n.count(b, `SELECT count(*) FROM task_runs WHERE scheduled_for >= $1 AND scheduled_for < $2`, from, to)
	waitCount(b, n, runs, 2*time.Minute,
		`SELECT count(*) FROM task_runs WHERE started_at IS NOT NULL AND scheduled_for >= $1 AND scheduled_for < $2`, from, to)
	b.StopTimer()
	rows, err := n.pool.Query(ctx, `
		SELECT id::text, scheduled_for, EXTRACT(EPOCH FROM started_at - scheduled_for) * 1000
		FROM task_runs WHERE scheduled_for >= $1 AND scheduled_for < $2`, from, to)
	if err != nil {
		b.Fatal(err)
	}
	var run, claim []float64
	var id string
	var tick time.Time
	var lag float64
	clock.mu.Lock()
	defer clock.mu.Unlock()
	_, err = pgx.ForEachRow(rows, []any{&id, &tick, &lag}, func() error {
		at, ok := clock.at[id]
		if !ok {
			return fmt.Errorf("run %s was never announced queued", id)
		}
		run, claim = append(run, lag), append(claim, float64(at.Sub(tick).Microseconds())/1000)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	p50, p99, most := lags(run)
	b.ReportMetric(p50, "p50_lag_ms")
	b.ReportMetric(p99, "p99_lag_ms")
	b.ReportMetric(most, "max_lag_ms")
	p50, p99, most = lags(claim)
	b.ReportMetric(p50, "p50_claim_ms")
	b.ReportMetric(p99, "p99_claim_ms")
	b.ReportMetric(most, "max_claim_ms")
	b.ReportMetric(float64(len(run))/measure.Seconds(), "runs/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkThroughput: raw River no-op jobs/s, end-to-end publish-task
// runs/s and webhook-task runs/s (claim, enqueue, work, record; the
// webhook's target a local server answering 204) on one worker node, one
// after the other in the same run; the ratio of each to the no-op rate is
// the throughput figure docs/scaling.md sets a goal for. Runs announce their statuses and a
// publish action publishes its event through the realtime bus, stored in
// the owner's stream as in production (four stored events a publish run,
// three a webhook run). "silent" runs are publish runs that drop every
// event: the run's own bookkeeping, which is what sittings before
// 2026-12-01 22:48 UTC measured as publish.
func BenchmarkThroughput(b *testing.B) {
	const jobsCount = 5000
	ctx := context.Background()
	n := newBenchNode(b, nil)
	if err := n.claimer.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer n.claimer.Stop()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer target.Close()

	noop := n.rate(b, jobsCount, `SELECT count(*) FROM river_job WHERE kind = 'bench_noop' AND state = 'completed'`, func() {
		params := make([]river.InsertManyParams, jobsCount)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := n.river.InsertManyFast(ctx, params); err != nil {
			b.Fatal(err)
		}
	})
	publish := n.runsDue(b, jobsCount, publishAction)
	webhook := n.runsDue(b, jobsCount, fmt.Sprintf(`{"type":"webhook","url":%q}`, target.URL+"/hook"))
	n.pub.silent.Store(true)
	silent := n.runsDue(b, jobsCount, publishAction)
	// One unit shape for the rates (jobs or runs done per second), so
	// switchboard-bench divides each by the no-op baseline.
	b.ReportMetric(noop, "noop_done/s")
	b.ReportMetric(publish, "publish_done/s")
	b.ReportMetric(webhook, "webhook_done/s")
	b.ReportMetric(silent, "silent_done/s")
	b.ReportMetric(0, "ns/op")
}

// runsDue creates count tasks with action, due, and returns how many of
// their runs succeeded per second from the moment the claim loop was woken:
// the claim is part of what is measured.
func (n *benchNode) runsDue(b *testing.B, count int, action string) float64 {
	n.claimer.SetPaused(true)
	n.createTasks(b, count, "@every 1h", action, time.Now().Add(-100*time.Millisecond))
	return n.rate(b, count, `SELECT count(*) FROM task_runs WHERE status = 'succeeded'`, func() { n.claimer.SetPaused(false) })
}

// rate starts count jobs with start and returns how many finished per
// second, counting with done (relative to what it counted before).
func (n *benchNode) rate(b *testing.B, count int, done string, start func()) float64 {
	base := n.count(b, done)
	began := time.Now()
	start()
	waitCount(b, n, base+count, 2*time.Minute, done)
	return float64(count) / time.Since(began).Seconds()
}

// BenchmarkThroughputFloor: the least a scheduled run can cost, against
// raw River no-op jobs on the same node, in the same run. Its "floor" runs
// keep only what claiming a tick exactly once needs (DESIGN.md's claim):
// a claim loop locks due tasks (FOR UPDATE SKIP LOCKED, batches and
// parallel claims as the claim loop's), advances them and inserts a no-op River job per tick in
// the same transaction; River works the jobs. No run rows, no attempts, no
// announcements: any design of runs costs at least this. Its ratio to the
// no-op rate bounds that goal from above.
func BenchmarkThroughputFloor(b *testing.B) {
	const jobsCount = 5000
	ctx := context.Background()
	n := newBenchNode(b, nil)
	const done = `SELECT count(*) FROM river_job WHERE kind = 'bench_noop' AND state = 'completed'`
	noop := n.rate(b, jobsCount, done, func() {
		params := make([]river.InsertManyParams, jobsCount)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := n.river.InsertManyFast(ctx, params); err != nil {
			b.Fatal(err)
		}
	})
	n.createTasks(b, jobsCount, "@every 1h", publishAction, time.Now().Add(-100*time.Millisecond))
	var wait func() error
	floor := n.rate(b, jobsCount, done, func() { wait = n.startFloor(ctx) })
	if err := wait(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(noop, "noop_done/s")
	b.ReportMetric(floor, "floor_done/s")
	b.ReportMetric(0, "ns/op")
}

// startFloor claims every due task as BenchmarkThroughputFloor says, in
// the background, with the claim loop's defaults: batches of 100, four
// claim transactions at once while a backlog drains (ClaimerOptions).
// wait returns once nothing is due, with the first error.
func (n *benchNode) startFloor(ctx context.Context) (wait func() error) {
	const batch, parallel = 100, 4
	errs := make(chan error, parallel)
	for range parallel {
		go func() { errs <- n.claimFloor(ctx, batch) }()
	}
	return func() error {
		var first error
		for range parallel {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

// claimFloor claims every due task, batch by batch, as BenchmarkThroughputFloor
// says, until none is due.
func (n *benchNode) claimFloor(ctx context.Context, batch int) error {
	for {
		tx, err := n.pool.Begin(ctx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT id FROM tasks WHERE active AND next_run_at <= now()
			ORDER BY next_run_at LIMIT $1 FOR UPDATE SKIP LOCKED`, batch)
		var ids []uuid.UUID
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		}
		if err == nil && len(ids) > 0 {
			_, err = tx.Exec(ctx, `UPDATE tasks SET next_run_at = next_run_at + interval '1 hour',
				run_count = run_count + 1, last_run_at = now() WHERE id = ANY($1)`, ids)
		}
		if err == nil && len(ids) > 0 {
			params := make([]river.InsertManyParams, len(ids))
			for i := range params {
				params[i] = river.InsertManyParams{Args: noopArgs{}}
			}
			_, err = n.river.InsertManyFastTx(ctx, tx, params)
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		_ = tx.Rollback(ctx)
		if err != nil || len(ids) == 0 {
			return err
		}
	}
}
