package workers

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
)

func TestEveryAttemptIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{allowPrivate: true, backoff: func(n int) time.Duration { return time.Duration(n) * 700 * time.Millisecond }})
	hook := newHookServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < 2 {
			http.Error(w, "busy "+string(rune('a'+n)), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("done"))
	})
	task := b.task(t, webhook(hook.URL))
	run := b.trigger(t, task.ID)

	var between jobs.Run
	testwait.For(t, 10*time.Second, "the run to wait for its second attempt", func() bool {
		var err error
		between, err = jobs.GetRun(ctx, b.pool, personal(t, b.pool, b.owner), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		return between.Status == jobs.StatusQueued && between.Attempt == 1
	})
	if between.NextAttemptAt == nil || between.StartedAt == nil || !between.NextAttemptAt.After(*between.StartedAt) {
		t.Fatalf("between attempts: next_attempt_at %v, started %v", between.NextAttemptAt, between.StartedAt)
	}

	done := b.waitRun(t, run.ID, 20*time.Second)
	if done.Status != jobs.StatusSucceeded || done.Attempt != 3 || done.NextAttemptAt != nil {
		t.Fatalf("run: %+v", done)
	}
	attempts, err := jobs.ListAttempts(ctx, b.pool, personal(t, b.pool, b.owner), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		status, excerpt string
		http            int
	}{{"failed", "busy a\n", 503}, {"failed", "busy b\n", 503}, {"succeeded", "done", 200}}
	if len(attempts) != len(want) {
		t.Fatalf("attempts: %+v", attempts)
	}
	// The attempt's record is written at its end with the start the run
	// recorded for it.
	if !attempts[2].StartedAt.Equal(*done.StartedAt) {
		t.Errorf("last attempt started %v, the run says %v", attempts[2].StartedAt, *done.StartedAt)
	}
	for i, a := range attempts {
		w := want[i]
		if a.Attempt != i+1 || a.Status != w.status || a.HTTPStatus == nil || *a.HTTPStatus != w.http ||
			a.ResponseExcerpt == nil || *a.ResponseExcerpt != w.excerpt || a.FinishedAt == nil || a.DurationMS == nil ||
			a.FinishedAt.Before(a.StartedAt) || (w.status == "failed") != (a.Error != nil) {
			t.Errorf("attempt %d: %+v", i+1, a)
		}
		if i > 0 && attempts[i].StartedAt.Before(*attempts[i-1].FinishedAt) {
			t.Errorf("attempt %d started before attempt %d finished", i+1, i)
		}
	}
	if _, err := jobs.ListAttempts(ctx, b.pool, personal(t, b.pool, dbtest.User(t, b.pool, nil).ID), run.ID); err == nil {
		t.Fatal("another owner listed the attempts")
	}
}
