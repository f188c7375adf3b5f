package workers

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
)

// countedWatch counts the times it is told a job is fetchable.
type countedWatch struct{ n atomic.Int64 }

func (w *countedWatch) FetchableAt(time.Time) { w.n.Add(1) }

// TestFairShare: the replica's count of running jobs per project, and the
// fetch asked for again when a worker frees after a fetch withheld jobs.
func TestFairShare(t *testing.T) {
	t.Parallel()

	t.Run("counts jobs in and out, once each", func(t *testing.T) {
		t.Parallel()
		watch := &countedWatch{}
		s := newFairShare(100, watch)
		if s.reserve != 5 || s.share != 1 {
			t.Fatalf("100 workers: reserve %d, share %d; want 5 and 1", s.reserve, s.share)
		}
		job := func(id int64, project string) *rivertype.JobRow {
			return &rivertype.JobRow{ID: id, Metadata: fmt.Appendf(nil, `{"project":%q}`, project)}
		}
		s.took([]*rivertype.JobRow{job(1, "a"), job(2, "a"), job(3, "b")}, false)
		if p := s.params(nil); p.Running["a"] != 2 || p.Running["b"] != 1 || p.Share != 1 || p.Reserve != 5 {
			t.Fatalf("params %+v", p)
		}
		s.done(1)
		s.done(1, 3)
		if p := s.params(nil); len(p.Running) != 1 || p.Running["a"] != 1 || watch.n.Load() != 0 {
			t.Fatalf("after two ends: running %v, fetches asked %d", p.Running, watch.n.Load())
		}
		s.took([]*rivertype.JobRow{job(4, "a")}, true)
		s.done(4)
		s.done(2)
		if watch.n.Load() != 1 {
			t.Fatalf("fetches asked after a withheld fetch and two ends: %d, want 1", watch.n.Load())
		}
	})

	t.Run("a project's backlog drains without waiting for River's poll", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		pool := dbtest.NewPool(t)
		cfg, err := riverConfig(Options{ClientID: uuid.NewString(), DB: pool, MaxWorkers: 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		river.AddWorker(cfg.Workers, noopWorker{})
		cfg.FetchPollInterval = time.Hour
		share := newFairShare(4, nil)
		cfg.Middleware = append(cfg.Middleware, share)
		client, err := river.NewClient(&fairDriver{Driver: riverpgxv5.New(pool), pool: pool, share: share}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		claimer := jobs.NewClaimer(jobs.ClaimerOptions{DB: pool, River: client})
		if err := claimer.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(claimer.Stop)
		share.fetch = claimer
		params := make([]river.InsertManyParams, 60)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{Metadata: []byte(`{"project":"a"}`)}}
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			t.Fatal(err)
		}
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Stop(context.Background()) })
		// Each fetch takes 3 of the 4 workers' jobs (one is the reserve):
		// without being asked again River would fetch next in an hour.
		began := time.Now()
		defer func() { t.Logf("drained in %v", time.Since(began)) }()
		testwait.For(t, 30*time.Second, "the 60 jobs to complete", func() bool {
			var n int
			_ = pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&n)
			return n == 60
		})
		testwait.For(t, 5*time.Second, "every job counted out", func() bool { return len(share.params(nil).Running) == 0 })
	})
}
