package workers

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/realtime/stream"
)

func TestPruneRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	task := b.task(t, jobs.Action{Type: jobs.ActionPublish, Event: "x"})
	_, err := b.pool.Exec(ctx, `
		INSERT INTO task_runs (task_id, trigger, scheduled_for, status, finished_at)
		SELECT $1, 'manual', now(), s.status, now() - s.age
		FROM (VALUES ('succeeded', interval '40 days'), ('failed', interval '31 days'),
		             ('succeeded', interval '29 days'), ('succeeded', interval '1 hour')) AS s(status, age)`, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.pool.Exec(ctx, `INSERT INTO task_runs (task_id, trigger, scheduled_for, status, created_at) VALUES ($1, 'manual', now() - interval '60 days', 'queued', now() - interval '60 days')`, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	prune := PruneRunsTask(b.pool, 0)
	if prune.Name != "prune_runs" || prune.Every != time.Hour {
		t.Fatalf("task: %+v", prune)
	}
	n, err := prune.Run(ctx)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want the 2 finished runs older than 30 days", n, err)
	}
	var left int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM task_runs`).Scan(&left); err != nil || left != 3 {
		t.Fatalf("%d runs left, want 3 (recent ones and the unfinished one)", left)
	}
	if n, err := prune.Run(ctx); err != nil || n != 0 {
		t.Fatalf("second prune: %d, %v; want idempotent", n, err)
	}
}

// TestMaintenanceDeclaration: Maintenance declares each task whose
// dependencies are configured, a loop built from them registers exactly
// their rows one Every on, and River has no periodic job or queue left.
func TestMaintenanceDeclaration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reap := func(context.Context) (int64, error) { return 0, nil }
	for _, tc := range []struct {
		name string
		opts func(db.DB) Options
		want []string
	}{
		{"database", func(q db.DB) Options { return Options{DB: q} },
			[]string{"prune_runs", "reconcile_runs", "reap_ws_tickets", "prune_streams", "delete_spilled_bus_messages", "prune_ended_sessions"}},
		{"everything", func(q db.DB) Options {
			return Options{DB: q, RateLimitRetention: time.Minute, ReapNodes: reap, PruneIdempotency: reap}
		}, []string{"prune_runs", "reconcile_runs", "reap_ws_tickets", "prune_streams", "delete_spilled_bus_messages", "prune_ended_sessions", "ratelimit_prune", "idempotency_prune", "reap_cluster_nodes"}},
		{"no database", func(db.DB) Options { return Options{ReapNodes: reap} }, []string{"reap_cluster_nodes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.NewPool(t)
			opts := tc.opts(pool)
			tasks := Maintenance(opts)
			every := map[string]time.Duration{}
			var names []string
			for _, m := range tasks {
				names, every[m.Name] = append(names, m.Name), m.Every
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("tasks %v, want %v", names, tc.want)
			}
			var before time.Time
			if err := pool.QueryRow(ctx, `SELECT now()`).Scan(&before); err != nil {
				t.Fatal(err)
			}
			l := NewMaintenanceLoop(MaintenanceLoopOptions{DB: pool, Tasks: tasks})
			if err := l.register(ctx); err != nil {
				t.Fatal(err)
			}
			rows, err := pool.Query(ctx, `SELECT name, next_at, now() FROM maintenance_schedule ORDER BY name`)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var name string
				var at, now time.Time
				if err := rows.Scan(&name, &at, &now); err != nil {
					t.Fatal(err)
				}
				if e := every[name]; at.Before(before.Add(e)) || at.After(now.Add(e)) {
					t.Fatalf("%s: first period at %s, want %s after registering (%s–%s)", name, at, e, before, now)
				}
				got = append(got, name)
			}
			if rows.Err() != nil || !slices.Equal(got, slices.Sorted(slices.Values(tc.want))) {
				t.Fatalf("rows %v (%v), want %v", got, rows.Err(), tc.want)
			}
			if opts.DB == nil {
				if _, err := RiverConfig(opts); err == nil {
					t.Fatal("RiverConfig without a database: no error")
				}
				return
			}
			cfg, err := RiverConfig(opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.PeriodicJobs) != 0 || len(cfg.Queues) != 1 || cfg.Queues[QueueDefault].MaxWorkers == 0 {
				t.Fatalf("River: %d periodic jobs, queues %v; want none and the default queue", len(cfg.PeriodicJobs), cfg.Queues)
			}
		})
	}
}

func TestPruneStreamsTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	name := stream.RoomStream("prune-" + uuid.NewString())
	evs := make([]stream.Event, 5)
	for i := range evs {
		evs[i] = stream.Event{Stream: name, Event: "e"}
	}
	if _, err := stream.Append(ctx, b.pool, evs); err != nil {
		t.Fatal(err)
	}
	task := PruneStreamsTask(b.pool, stream.Retention{MaxEvents: 2})
	if task.Name != "prune_streams" || task.Every != time.Minute {
		t.Fatalf("task %s every %s", task.Name, task.Every)
	}
	if n, err := task.Run(ctx); err != nil || n != 3 {
		t.Fatalf("prune: %d, %v; want 3 deleted", n, err)
	}
	h, err := stream.Read(ctx, b.pool, name, 0, stream.Limit{})
	if err != nil || h.Oldest != 4 || len(h.Events) != 2 {
		t.Fatalf("after prune: oldest %d, %d events, %v", h.Oldest, len(h.Events), err)
	}
	t.Run("reaching the deadline is not a failure", func(t *testing.T) {
		t.Parallel()
		if _, err := pruneStreams(ctx, b.pool, stream.Retention{}, 0); err != nil {
			t.Fatalf("prune with its deadline passed: %v", err)
		}
	})
}
