package jobs

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// insertRunningJob puts a job in River's table as if node had fetched it.
func insertRunningJob(t *testing.T, q db.DB, args, node string, attempt, maxAttempts int) int64 {
	t.Helper()
	var id int64
	err := q.QueryRow(context.Background(), `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, attempted_by, priority)
		VALUES ($1, 'task_run', $4, 'default', 'running', $3, now(), ARRAY['someone-before', $2], 1)
		RETURNING id`, args, node, attempt, maxAttempts).Scan(&id)
	if err != nil {
		t.Fatalf("insert job: %v", err)
	}
	return id
}

func jobState(t *testing.T, q db.DB, id int64) (state string, errs int, finalized bool) {
	t.Helper()
	err := q.QueryRow(context.Background(), `SELECT state::text, coalesce(array_length(errors, 1), 0), finalized_at IS NOT NULL FROM river_job WHERE id = $1`, id).
		Scan(&state, &errs, &finalized)
	if err != nil {
		t.Fatal(err)
	}
	return state, errs, finalized
}

func TestNodeJobsRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("the dead nodes' jobs and their runs, nobody else's", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow })
		retried, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		spent, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		for _, id := range []string{retried.ID, spent.ID} {
			if _, err := StartRun(ctx, b.pool, id, 1); err != nil {
				t.Fatal(err)
			}
		}
		liveJob := insertRunningJob(t, b.pool, `{"run_id":"`+retried.ID+`"}`, "live", 1, 3)
		retry := insertRunningJob(t, b.pool, `{"run_id":"`+retried.ID+`"}`, "dead", 1, 3)
		discard := insertRunningJob(t, b.pool, `{"run_id":"`+spent.ID+`"}`, "dead", 3, 3)
		events := &recordedEvents{}
		n, err := NodeJobs{DB: b.pool, NodeID: "rescuer", Announcer: NewAnnouncer(AnnouncerOptions{Publisher: events})}.Rescue(ctx, []string{"dead"})
		if err != nil || n != 2 {
			t.Fatalf("rescued %d: %v", n, err)
		}
		// Each rescued run tells its owner its new status.
		if got := events.list(); len(got) != 2 || !slices.Contains(got, b.project+" task.run.queued "+retried.ID) || !slices.Contains(got, b.project+" task.run.failed "+spent.ID) {
			t.Fatalf("events of the rescued runs: %v", got)
		}
		if s, errs, fin := jobState(t, b.pool, retry); s != "available" || errs != 1 || fin {
			t.Fatalf("job with attempts left: %s, %d errors, finalized %v", s, errs, fin)
		}
		if s, _, fin := jobState(t, b.pool, discard); s != "discarded" || !fin {
			t.Fatalf("job with attempts spent: %s, finalized %v", s, fin)
		}
		if s, _, _ := jobState(t, b.pool, liveJob); s != "running" {
			t.Fatalf("live node's job: %s", s)
		}
		var msg string
		_ = b.pool.QueryRow(ctx, `SELECT errors[1]->>'error' FROM river_job WHERE id = $1`, retry).Scan(&msg)
		if msg != "node dead stopped heartbeating while running this job; rescued by node rescuer" {
			t.Fatalf("error recorded on the rescued job: %q", msg)
		}
		for id, want := range map[string]string{retried.ID: StatusQueued, spent.ID: StatusFailed} {
			if r, err := GetRun(ctx, b.pool, b.project, id); err != nil || r.Status != want {
				t.Fatalf("run %s: %+v %v, want %s", id, r, err, want)
			}
		}
	})

	t.Run("a job made available rings River's producers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow })
		run, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		if _, err := StartRun(ctx, b.pool, run.ID, 1); err != nil {
			t.Fatal(err)
		}
		insertRunningJob(t, b.pool, `{"run_id":"`+run.ID+`"}`, "dead", 1, 3)
		conn, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var channel string
		if err := conn.QueryRow(ctx, `SELECT current_schema() || '.river_insert'`).Scan(&channel); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		if n, err := (NodeJobs{DB: b.pool, NodeID: "rescuer"}).Rescue(ctx, []string{"dead"}); err != nil || n != 1 {
			t.Fatalf("rescued %d: %v", n, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		note, err := conn.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no insert notification after the rescue: %v", err)
		}
		var payload struct{ Queue string }
		if err := json.Unmarshal([]byte(note.Payload), &payload); err != nil || payload.Queue != "default" {
			t.Fatalf("notification %q on %s: %v", note.Payload, note.Channel, err)
		}
	})

	t.Run("the runs are recorded in the rescue's transaction", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		job := insertRunningJob(t, pool, `{"run_id":"x"}`, "dead", 1, 3) // not a run id: recording fails
		if _, err := (NodeJobs{DB: pool, NodeID: "rescuer"}).Rescue(ctx, []string{"dead"}); err == nil {
			t.Fatal("recording error not returned")
		}
		if s, _, _ := jobState(t, pool, job); s != "running" {
			t.Fatalf("after a failed recording the job is %s: the rescue committed without its runs", s)
		}
	})
}

func TestNodeJobsWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	w, err := NodeJobs{DB: tx}.Work(ctx)
	if err != nil || w.Queue.Running != 0 || len(w.RunningByNode) != 0 || w.Scheduler.DueTasks != 0 || w.Scheduler.OldestDueAgeMS != 0 {
		t.Fatalf("empty: %+v %v", w, err)
	}
	insertRunningJob(t, tx, `{}`, "node-a", 1, 3)
	// Two statements: the account's personal project is made at the end of
	// the statement that makes it.
	if _, err := tx.Exec(ctx, `INSERT INTO users (email, password_hash) VALUES ('backlog@example.com', 'x')`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `
		WITH u AS (SELECT id FROM users WHERE email = 'backlog@example.com')
		INSERT INTO tasks (owner_id, name, schedule, action, signing_secret, active, next_run_at)
		SELECT u.id, n.name, '@every 1s', '{"type":"publish","event":"x"}', 'whsec_x', n.active, now() + n.due
		FROM u, (VALUES ('late', true, interval '-5 seconds'), ('later', true, interval '-1 second'),
			('future', true, interval '1 hour'), ('paused', false, interval '-1 hour')) AS n(name, active, due)`)
	if err != nil {
		t.Fatal(err)
	}
	w, err = NodeJobs{DB: tx}.Work(ctx)
	if err != nil || w.Queue.Running != 1 || w.RunningByNode["node-a"] != 1 {
		t.Fatalf("queue: %+v %v", w, err)
	}
	if s := w.Scheduler; s.DueTasks != 2 || s.OldestDueAgeMS < 5000 || s.OldestDueAgeMS > 60000 {
		t.Fatalf("backlog: %+v", s)
	}
}

// recordedEvents is a Publisher that remembers "user event run-id".
type recordedEvents struct {
	mu     sync.Mutex
	events []string
}

func (e *recordedEvents) PublishProject(_ context.Context, userID, event string, payload any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := ""
	if r, ok := payload.(Run); ok {
		id = r.ID
	}
	e.events = append(e.events, userID+" "+event+" "+id)
	return nil
}

func (e *recordedEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}
