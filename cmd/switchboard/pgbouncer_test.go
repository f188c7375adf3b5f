package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime"
)

// TestThroughPgBouncer runs three replicas whose pools (and River) go
// through a real PgBouncer in transaction mode: one LISTENs on a direct
// session connection (SWITCHBOARD_LISTEN_DATABASE_URL), two are poll-only. Every query runs with the transaction-pooled exec mode (no
// named prepared statements: PgBouncer 1.18 has none), an every-second
// task ticks exactly once per tick, stored events cross both ways,
// ephemeral frames from a poll-only replica reach the others, the
// operator command and the River UI work, and the auth rate limit is one
// limit for both.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct := dbtest.NewDatabaseURL(t)
	pooled := dbtest.ThroughPgBouncer(t, direct)
	cfg := func(listen string) config.Config {
		c := keyedConfig(t, pooled)
		c.DatabasePooling, c.ListenURL, c.WebhookPrivate = config.PoolingTransaction, listen, true
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	listening, polling, polling2 := startServer(t, cfg(direct)), startServer(t, cfg("")), startServer(t, cfg(""))
	if listening.bus.PollOnly() || !polling.bus.PollOnly() {
		t.Fatalf("poll-only: listening replica %v, polling replica %v", listening.bus.PollOnly(), polling.bus.PollOnly())
	}
	servers := []*testServer{listening, polling}

	t.Run("an every-second task ticks exactly once per tick", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		calls := map[string]int{} // webhook-id header -> calls
		hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls[r.Header.Get("webhook-id")]++
			mu.Unlock()
		}))
		defer hook.Close()
		token, _ := registerUser(t, listening, "bouncer-cron@example.com")
		id := createTask(t, listening.URL, token, map[string]any{
			"name": "through pgbouncer", "schedule": "@every 1s",
			"action": map[string]any{"type": "webhook", "url": hook.URL},
		})
		testwait.For(t, 30*time.Second, "five scheduled runs to succeed", func() bool {
			return countRuns(t, direct, id, "succeeded") >= 5
		})
		if status, _ := call(t, http.MethodPatch, polling.URL+"/v1/tasks/"+id, map[string]any{"active": false}, token); status != http.StatusOK {
			t.Fatalf("pause: %d", status)
		}
		// Runs queued before the pause finish; then calls and runs match.
		testwait.For(t, 30*time.Second, "no run left queued or running", func() bool {
			return countRuns(t, direct, id, "queued")+countRuns(t, direct, id, "running") == 0
		})
		runs := requireOneRunPerTick(t, direct, id)
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != runs {
			t.Fatalf("%d webhook messages for %d succeeded runs", len(calls), runs)
		}
		for msg, n := range calls {
			if n != 1 {
				t.Fatalf("webhook message %s delivered %d times", msg, n)
			}
		}
	})

	t.Run("events cross from the polling replica to the listening one and back", func(t *testing.T) {
		t.Parallel()
		tokA, userA := registerUser(t, listening, "bouncer-a@example.com")
		tokB, userB := registerUser(t, polling, "bouncer-b@example.com")
		onListening, onPolling := connect(t, listening, tokA), connect(t, polling, tokB)
		connected(t, listening, userA, 1)
		connected(t, polling, userB, 1)
		// Both directions: the listener's doorbell, and the poller's read.
		onPolling.send(t, realtime.Frame{Event: "dm", To: userA, Payload: json.RawMessage(`{"n":1}`)})
		if f := onListening.expect(t, "dm"); f.From != userB || string(f.Payload) != `{"n":1}` {
			t.Fatalf("dm on the listening replica %+v", f)
		}
		onListening.send(t, realtime.Frame{Event: "dm", To: userB, Payload: json.RawMessage(`{"n":2}`)})
		if f := onPolling.expect(t, "dm"); f.From != userA || string(f.Payload) != `{"n":2}` {
			t.Fatalf("dm on the polling replica %+v", f)
		}
	})

	t.Run("ephemeral frames from a polling replica reach the others", func(t *testing.T) {
		t.Parallel()
		tokS, _ := registerUser(t, polling, "bouncer-typist@example.com")
		tokR, rcpt := registerUser(t, polling, "bouncer-reader@example.com")
		from := connect(t, polling, tokS)
		onListening, onPolling := connect(t, listening, tokR), connect(t, polling2, tokR)
		connected(t, listening, rcpt, 1)
		connected(t, polling2, rcpt, 1)
		from.send(t, realtime.Frame{Event: "typing", To: rcpt, Payload: json.RawMessage(`{"typing":true}`)})
		for _, s := range []*sock{onListening, onPolling} {
			if f := s.expect(t, "typing"); string(f.Payload) != `{"typing":true}` || f.Offset != 0 {
				t.Fatalf("typing frame %+v", f)
			}
		}
	})

	t.Run("the admin command and the River UI work through it", func(t *testing.T) {
		t.Parallel()
		registerUser(t, polling, "bouncer-ops@example.com")
		runAdmin(t, polling, "grant", "bouncer-ops@example.com")
		req, _ := http.NewRequest(http.MethodGet, listening.URL+"/riverui/api/jobs?state=completed", nil)
		req.SetBasicAuth("bouncer-ops@example.com", "correct horse")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("River UI job list through pgbouncer: %d", res.StatusCode)
		}
	})

	t.Run("the auth rate limit is one limit for both replicas", func(t *testing.T) {
		t.Parallel()
		registerUser(t, listening, "bouncer-burst@example.com")
		requireBurstThenLimited(t, 9, servers, "bouncer-burst@example.com", noHeader, keyedWindow)
	})
}

func countRuns(t *testing.T, dbURL, taskID, status string) int {
	t.Helper()
	var n int
	queryDirect(t, dbURL, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND trigger = 'schedule' AND status = $2`, taskID, status).Scan(&n)
	})
	return n
}

// requireOneRunPerTick: every scheduled run of the task has its own tick.
func requireOneRunPerTick(t *testing.T, dbURL, taskID string) int {
	t.Helper()
	var runs, ticks int
	queryDirect(t, dbURL, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT count(*), count(DISTINCT scheduled_for)
			FROM task_runs WHERE task_id = $1 AND trigger = 'schedule' AND status = 'succeeded'`, taskID).Scan(&runs, &ticks)
	})
	if runs != ticks {
		t.Fatalf("%d scheduled runs for %d ticks", runs, ticks)
	}
	return runs
}

func queryDirect(t *testing.T, dbURL string, fn func(context.Context, *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if err := fn(ctx, c); err != nil {
		t.Fatal(err)
	}
}
