package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/quota"
)

func TestTriggerBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("1000 items with 10 repeated keys make 990 runs and answer the repeats with the earlier runs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule, t.Overlap = nil, OverlapAllow })
		items := make([]TriggerRequest, MaxBatchItems)
		for i := range items {
			items[i] = TriggerRequest{IdempotencyKey: fmt.Sprintf("k-%d", i), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
			if i >= 990 {
				items[i].IdempotencyKey = fmt.Sprintf("k-%d", (i-990)*7) // repeats an earlier item
			}
		}
		res, err := TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, b.project, task.ID, items)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res[:990] {
			if r.Err != nil || r.Replayed || r.Run.ID == "" || string(r.Run.Payload) != fmt.Sprintf(`{"n": %d}`, i) {
				t.Fatalf("item %d: %+v", i, r)
			}
		}
		for i, r := range res[990:] {
			if first := res[(i)*7]; !r.Replayed || r.Run.ID != first.Run.ID {
				t.Fatalf("repeat %d: %+v, want run %s replayed", i, r, first.Run.ID)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM task_runs WHERE task_id = $1`, task.ID); n != 990 {
			t.Fatalf("%d runs, want 990", n)
		}
		if n := b.count(t, `SELECT count(*) FROM river_job WHERE args->>'task_id' = $1`, task.ID); n != 990 {
			t.Fatalf("%d river jobs, want 990", n)
		}
		if got := b.get(t, task.ID).RunCount; got != 990 {
			t.Fatalf("run_count %d, want 990", got)
		}

		// The same batch again: every item answers its earlier run.
		again, err := TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, b.project, task.ID, items)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range again {
			if !r.Replayed || r.Run.ID != res[i].Run.ID {
				t.Fatalf("again, item %d: %+v, want %s", i, r, res[i].Run.ID)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM task_runs WHERE task_id = $1`, task.ID); n != 990 {
			t.Fatalf("%d runs after the repeat, want 990", n)
		}
	})

	t.Run("an invalid item answers its own error and the others proceed", func(t *testing.T) {
		t.Parallel()
		b, _ := aheadBundle(t)
		task := b.task(t, func(t *Task) { t.Schedule, t.Overlap = nil, OverlapAllow })
		past, later := time.Now().Add(-time.Hour), time.Now().Add(time.Hour).Truncate(time.Millisecond)
		items := []TriggerRequest{
			{Payload: json.RawMessage(`1`)},
			{RunAt: &past},
			{IdempotencyKey: "bad\x01key"},
			{IdempotencyKey: "retry-of:x"},
			{Payload: json.RawMessage(`"` + strings.Repeat("x", maxJSON) + `"`)},
			{RunAt: &later, IdempotencyKey: "later"},
			{IdempotencyKey: "bad\x01key"}, // repeats an invalid item: its error
		}
		res, err := TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, b.project, task.ID, items)
		if err != nil {
			t.Fatal(err)
		}
		wantField := []string{"", "run_at", "idempotency_key", "idempotency_key", "payload", "", "idempotency_key"}
		for i, r := range res {
			v, bad := IsValidation(r.Err)
			if bad != (wantField[i] != "") || bad && v.Field != wantField[i] || !bad && r.Run.ID == "" {
				t.Fatalf("item %d: %+v, want error at %q", i, r, wantField[i])
			}
		}
		if !res[5].Run.ScheduledFor.Equal(later) {
			t.Fatalf("delayed item scheduled for %v, want %v", res[5].Run.ScheduledFor, later)
		}
		if n := b.count(t, `SELECT count(*) FROM river_job WHERE args->>'task_id' = $1 AND state = 'available' AND scheduled_at > now()`, task.ID); n != 1 {
			t.Fatalf("%d delayed jobs inserted available, want 1", n)
		}
		if n := b.count(t, `SELECT count(*) FROM task_runs WHERE task_id = $1`, task.ID); n != 2 {
			t.Fatalf("%d runs, want 2", n)
		}
	})

	t.Run("overlap skip admits the first new item only", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = nil })
		res, err := TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, b.project, task.ID, []TriggerRequest{{}, {}, {}})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil || !errors.Is(res[1].Err, ErrRunActive) || !errors.Is(res[2].Err, ErrRunActive) {
			t.Fatalf("skip: %+v", res)
		}
		res, err = TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, b.project, task.ID, []TriggerRequest{{}})
		if err != nil || !errors.Is(res[0].Err, ErrRunActive) {
			t.Fatalf("skip with a run queued: %+v, %v", res, err)
		}
	})

	t.Run("a cancel_other task, an unknown task and too many items are refused whole", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule, t.Overlap = nil, OverlapCancelOther })
		if _, err := TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, b.project, task.ID, []TriggerRequest{{}}); !errors.Is(err, ErrBatchCancelOther) {
			t.Fatalf("cancel_other: %v", err)
		}
		other := b.task(t, func(t *Task) { t.Schedule, t.Overlap = nil, OverlapAllow })
		if _, err := TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, "00000000-0000-0000-0000-000000000000", other.ID, []TriggerRequest{{}}); err == nil {
			t.Fatal("another project's task: no error")
		}
		if _, err := TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, b.project, other.ID, make([]TriggerRequest, MaxBatchItems+1)); err == nil {
			t.Fatal("1001 items: no error")
		}
		if n := b.count(t, `SELECT count(*) FROM task_runs`); n != 0 {
			t.Fatalf("%d runs made by refused batches", n)
		}
	})
}
