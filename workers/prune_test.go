package workers

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

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

func TestRiverConfigPeriodicJobs(t *testing.T) {
	t.Parallel()
	reap := func(context.Context) (int64, error) { return 0, nil }
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"database", Options{DB: setup(t, setupOpts{}).pool},
			[]string{"prune_runs", "reap_ws_tickets", "prune_streams", "delete_spilled_bus_messages"}},
		{"everything", Options{DB: setup(t, setupOpts{}).pool, RateLimitRetention: time.Minute, ReapNodes: reap},
			[]string{"prune_runs", "reap_ws_tickets", "prune_streams", "delete_spilled_bus_messages", "ratelimit_prune", "reap_cluster_nodes"}},
		{"no database", Options{ReapNodes: reap}, []string{"reap_cluster_nodes"}},
	} {
		cfg, err := RiverConfig(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range Maintenance(tc.opts) {
			names = append(names, m.Name)
		}
		if !slices.Equal(names, tc.want) || len(cfg.PeriodicJobs) != len(tc.want) {
			t.Fatalf("%s: tasks %v and %d periodic jobs, want %v", tc.name, names, len(cfg.PeriodicJobs), tc.want)
		}
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
	h, err := stream.Read(ctx, b.pool, name, 0, 0)
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
