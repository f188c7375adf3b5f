package workers

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
)

// TestOutcomeSurvivesDatabaseOutage: the database becomes unreachable
// while a webhook is in flight (every connection of the worker's node cut,
// new ones refused, as during a failover) and comes back 3 s later. The
// worker keeps trying to record the outcome, so the run ends succeeded with
// its one attempt as soon as the database answers again, not minutes later
// when River rescues a job whose completion was lost too.
func TestOutcomeSurvivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	proxy := dbtest.NewCutProxy(t, dbURL)
	direct, err := db.Connect(ctx, dbURL, db.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	pool, err := db.Connect(ctx, proxy.URL(dbURL), db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pub := &recordingPublisher{}
	client := startRiver(t, pool, Options{ClientID: uuid.NewString(), DB: pool, Publisher: pub,
		Webhook: WebhookOptions{AllowPrivate: true}}, 100*time.Millisecond)
	b := &testBundle{pool: direct, river: client, pub: pub, owner: dbtest.User(t, direct, nil).ID}

	inFlight, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := newHookServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { close(inFlight) })
		<-release
		w.WriteHeader(http.StatusNoContent)
	})
	run := b.trigger(t, b.task(t, webhook(hook.URL)).ID)
	<-inFlight
	proxy.Cut()
	close(release) // the target answers while the database is unreachable
	testwait.For(t, 10*time.Second, "the node to find the database unreachable", func() bool { return proxy.Refused() >= 3 })
	time.Sleep(3 * time.Second) // the outage: an interval to wait out, not an event
	proxy.Restore()

	got := b.waitRun(t, run.ID, 15*time.Second)
	if got.Status != jobs.StatusSucceeded || got.Attempt != 1 {
		t.Fatalf("run after the outage: status %s, attempt %d (want succeeded on attempt 1)", got.Status, got.Attempt)
	}
	attempts, err := jobs.ListAttempts(ctx, direct, personal(t, direct, b.owner), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 1 || attempts[0].Status != jobs.StatusSucceeded {
		t.Fatalf("attempts after the outage: %+v (want one, succeeded)", attempts)
	}
	if n := len(hook.requests()); n != 1 {
		t.Fatalf("the target was called %d times, want 1", n)
	}
}
