package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A task that becomes due sooner rings TasksChannel at commit (the
// trigger of migrations/00013): created, resumed, moved earlier. The
// claim, a later schedule, a pause and a deactivation do not. Each step
// is followed by a sentinel notification: notifications arrive in commit
// order, so the sentinel first means the step sent none.
func TestTaskNotice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	conn, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+TasksChannel); err != nil {
		t.Fatal(err)
	}
	rang := func(t *testing.T) bool {
		t.Helper()
		if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, 'sentinel')`, TasksChannel); err != nil {
			t.Fatal(err)
		}
		wait := func() string {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			n, err := conn.WaitForNotification(wctx)
			if err != nil {
				t.Fatalf("wait for a notification: %v", err)
			}
			return n.Payload
		}
		if wait() == "sentinel" {
			return false
		}
		if p := wait(); p != "sentinel" {
			t.Fatalf("two notices from one step (%q)", p)
		}
		return true
	}
	step := func(name string, want bool, do func() error) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := rang(t); got != want {
			t.Fatalf("%s: notice %v, want %v", name, got, want)
		}
	}
	var task Task
	step("create", true, func() (err error) { task = b.task(t, func(t *Task) { t.Schedule = new("@every 1h") }); return nil })
	step("move due now", true, func() error { b.dueAt(t, task.ID, time.Now().Add(-time.Second)); return nil })
	c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
	step("claim", false, func() error {
		n, err := c.ClaimOnce(ctx)
		if err == nil && n != 1 {
			t.Fatalf("claimed %d tasks, want 1", n)
		}
		return err
	})
	patch := func(p TaskPatch) func() error {
		return func() error { _, err := UpdateTask(ctx, b.pool, b.project, task.ID, p, false); return err }
	}
	step("a later schedule", false, patch(TaskPatch{Schedule: ptr(new("@every 2h"))}))
	step("pause", false, patch(TaskPatch{Active: new(false)}))
	step("resume", true, patch(TaskPatch{Active: new(true)}))
	step("an earlier schedule", true, patch(TaskPatch{Schedule: ptr(new("@every 1m"))}))
	step("rename", false, patch(TaskPatch{Name: new("renamed")}))
	step("deactivate", false, func() error { return DeactivateTask(ctx, b.pool, task.ID) })
}

func ptr[T any](v T) *T { return &v }
