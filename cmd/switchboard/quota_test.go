package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// testQuotas are small quotas, so that reaching them takes a few requests.
var testQuotas = config.Quotas{Tasks: 5, Rooms: 3, APIKeys: 3, QueuedRuns: 6, BackfillTicks: 4}

// quotaReplicas are two web replicas (nothing runs the queued runs, so they
// stay not final) on one database with testQuotas.
func quotaReplicas(t *testing.T) ([]*testServer, string) {
	t.Helper()
	dbURL := dbtest.NewDatabaseURL(t)
	servers := make([]*testServer, 2)
	for i := range servers {
		cfg := testConfig(t, dbURL)
		cfg.Roles, cfg.Quotas = []string{config.RoleWeb}, testQuotas
		servers[i] = startServer(t, cfg)
	}
	return servers, dbURL
}

type called struct {
	status int
	body   map[string]any
}

// callAtOnce sends n requests at once, alternating between the replicas,
// the i-th to path(i) with body(i).
func callAtOnce(t *testing.T, servers []*testServer, n int, method string, path func(i int) string, body func(i int) any, token string) []called {
	t.Helper()
	out := make([]called, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i].status, out[i].body = call(t, method, servers[i%len(servers)].URL+path(i), body(i), token)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// requireRefusedByQuota checks a refusal: the status, and a problem naming
// the quota, its limit and the use.
func requireRefusedByQuota(t *testing.T, c called, status int, quota string, limit, used, asked int) {
	t.Helper()
	b := c.body
	if c.status != status || b["quota"] != quota || b["limit"] != float64(limit) || b["used"] != float64(used) || b["asked"] != float64(asked) {
		t.Fatalf("got %d %v, want %d naming quota %s, limit %d, used %d, asked %d", c.status, b, status, quota, limit, used, asked)
	}
}

// splitAnswers counts the answers with status ok and checks every other is
// a refusal by the quota at its limit.
func splitAnswers(t *testing.T, answers []called, ok, refused int, quota string, limit int) int {
	t.Helper()
	n := 0
	for _, a := range answers {
		if a.status == ok {
			n++
			continue
		}
		requireRefusedByQuota(t, a, refused, quota, limit, limit, 1)
	}
	return n
}

// countItems is the length of the list a GET of path answers.
func countItems(t *testing.T, srv *testServer, path, token string) int {
	t.Helper()
	status, body := call(t, http.MethodGet, srv.URL+path, nil, token)
	items, ok := body["items"].([]any)
	if status != http.StatusOK || !ok {
		t.Fatalf("GET %s: %d %v", path, status, body)
	}
	return len(items)
}

// countRows counts the rows of table (tasks, rooms, api-keys) in the
// personal project of user.
func countRows(t *testing.T, dbURL, table, user string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{strings.ReplaceAll(table, "-", "_")}.Sanitize()+`
		WHERE project_id = (SELECT id FROM projects WHERE personal_of = $1)`, user).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCountQuotasHoldAcrossReplicas: requests racing for a project's last
// task, room or API key on two replicas make exactly one; the others are
// 409 naming the quota, and change nothing.
func TestCountQuotasHoldAcrossReplicas(t *testing.T) {
	t.Parallel()
	servers, dbURL := quotaReplicas(t)
	for _, tc := range []struct {
		quota, path string
		limit       int
		body        func(i int) any
	}{
		{"tasks", "/v1/tasks", testQuotas.Tasks, func(i int) any {
			return map[string]any{"name": fmt.Sprint("t", i), "action": map[string]any{"type": "publish", "event": "e"}}
		}},
		{"rooms", "/v1/rooms", testQuotas.Rooms, func(i int) any {
			return map[string]any{"name": fmt.Sprintf("quota-room-%d-%d", i, time.Now().UnixNano()), "visibility": "open"}
		}},
		{"api_keys", "/v1/api-keys", testQuotas.APIKeys, func(i int) any { return map[string]any{"name": fmt.Sprint("k", i)} }},
	} {
		t.Run(tc.quota, func(t *testing.T) {
			t.Parallel()
			token, user := registerUser(t, servers[0], tc.quota+"-quota@example.com")
			for i := range tc.limit - 1 {
				if status, body := call(t, http.MethodPost, servers[i%2].URL+tc.path, tc.body(100+i), token); status != http.StatusCreated {
					t.Fatalf("create %d: %d %v", i, status, body)
				}
			}
			answers := callAtOnce(t, servers, 6, http.MethodPost, func(int) string { return tc.path }, tc.body, token)
			if made := splitAnswers(t, answers, http.StatusCreated, http.StatusConflict, tc.quota, tc.limit); made != 1 {
				t.Fatalf("%d racing creates of the last one made %d: %v", len(answers), made, answers)
			}
			if n := countRows(t, dbURL, strings.TrimPrefix(tc.path, "/v1/"), user); n != tc.limit {
				t.Fatalf("%d stored, want the quota, %d", n, tc.limit)
			}
		})
	}
}

// TestRunQuotasHoldAcrossReplicas: triggers racing for a project's last
// queued runs on two replicas make exactly what is left; the others, and a
// batch or backfill past a quota, are 429 naming it and make nothing.
func TestRunQuotasHoldAcrossReplicas(t *testing.T) {
	t.Parallel()
	servers, _ := quotaReplicas(t)
	t.Run("queued runs", func(t *testing.T) {
		t.Parallel()
		token, _ := registerUser(t, servers[0], "runs-quota@example.com")
		// Triggers of one task wait for each other on its row; these race
		// on three.
		runsOf := func(i int) string {
			return "/v1/tasks/" + createTask(t, servers[0].URL, token, map[string]any{
				"name": fmt.Sprint("on demand ", i), "overlap": "allow", "action": map[string]any{"type": "publish", "event": "e"},
			}) + "/runs"
		}
		paths := []string{runsOf(0), runsOf(1), runsOf(2)}
		for i := range testQuotas.QueuedRuns - 2 {
			if status, body := call(t, http.MethodPost, servers[i%2].URL+paths[0], nil, token); status != http.StatusAccepted {
				t.Fatalf("trigger %d: %d %v", i, status, body)
			}
		}
		answers := callAtOnce(t, servers, 6, http.MethodPost, func(i int) string { return paths[i%3] }, func(int) any { return nil }, token)
		if made := splitAnswers(t, answers, http.StatusAccepted, http.StatusTooManyRequests, "queued_runs", testQuotas.QueuedRuns); made != 2 {
			t.Fatalf("%d racing triggers of the last 2 runs made %d: %v", len(answers), made, answers)
		}
		status, body := call(t, http.MethodPost, servers[1].URL+paths[1]+"/batch", map[string]any{"items": []any{map[string]any{}}}, token)
		requireRefusedByQuota(t, called{status, body}, http.StatusTooManyRequests, "queued_runs", 6, 6, 1)
		n := 0
		for _, p := range paths {
			n += countItems(t, servers[1], p, token)
		}
		if n != testQuotas.QueuedRuns {
			t.Fatalf("%d runs stored, want the quota, %d", n, testQuotas.QueuedRuns)
		}
	})
	t.Run("batch counts whole", func(t *testing.T) {
		t.Parallel()
		token, _ := registerUser(t, servers[0], "batch-quota@example.com")
		task := createTask(t, servers[0].URL, token, map[string]any{
			"name": "on demand", "overlap": "allow", "action": map[string]any{"type": "publish", "event": "e"},
		})
		path := "/v1/tasks/" + task + "/runs"
		items := make([]any, testQuotas.QueuedRuns+1)
		for i := range items {
			items[i] = map[string]any{}
		}
		status, body := call(t, http.MethodPost, servers[0].URL+path+"/batch", map[string]any{"items": items}, token)
		requireRefusedByQuota(t, called{status, body}, http.StatusTooManyRequests, "queued_runs", 6, 0, 7)
		if n := countItems(t, servers[1], path, token); n != 0 {
			t.Fatalf("a refused batch made %d runs", n)
		}
	})
	t.Run("backfilled ticks", func(t *testing.T) {
		t.Parallel()
		token, _ := registerUser(t, servers[0], "backfill-quota@example.com")
		hourly := func(i int) string {
			return createTask(t, servers[0].URL, token, map[string]any{
				"name": fmt.Sprint("hourly ", i), "schedule": "0 * * * *", "overlap": "allow", "action": map[string]any{"type": "publish", "event": "e"},
			})
		}
		tasks := []string{hourly(0), hourly(1), hourly(2), hourly(3), hourly(4)} // the tasks quota
		hours := func(n int) map[string]any {
			from := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
			return map[string]any{"from": from, "to": from.Add(time.Duration(n)*time.Hour - time.Minute)}
		}
		status, body := call(t, http.MethodPost, servers[0].URL+"/v1/tasks/"+tasks[0]+"/backfill", hours(5), token)
		requireRefusedByQuota(t, called{status, body}, http.StatusTooManyRequests, "backfill_ticks", 4, 0, 5)
		// Backfills of 3 ticks of five tasks racing: one fits, the others
		// would pass 4.
		answers := callAtOnce(t, servers, len(tasks), http.MethodPost, func(i int) string { return "/v1/tasks/" + tasks[i] + "/backfill" },
			func(int) any { return hours(3) }, token)
		made := 0
		for _, a := range answers {
			if a.status == http.StatusAccepted {
				made++
				continue
			}
			requireRefusedByQuota(t, a, http.StatusTooManyRequests, "backfill_ticks", 4, 3, 3)
		}
		if made != 1 {
			t.Fatalf("%d racing backfills of 3 ticks: %d made theirs, want 1: %v", len(tasks), made, answers)
		}
		n := 0
		for _, task := range tasks {
			n += countItems(t, servers[1], "/v1/tasks/"+task+"/runs", token)
		}
		if n != 3 {
			t.Fatalf("%d runs stored, want 3", n)
		}
	})
}

// TestAPIKeysShareTheAccountsRateLimit: six API keys of one account, used
// at once on two replicas, get no more than the account's limit between
// them (and its token what is left).
func TestAPIKeysShareTheAccountsRateLimit(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	servers := make([]*testServer, 2)
	const window = 800 * time.Second // no request of the test outlives a window
	const limit = 30
	for i := range servers {
		cfg := testConfig(t, dbURL)
		cfg.UserBurst, cfg.UserRate = limit, limit/window.Seconds()
		cfg.APIKeyBurst, cfg.APIKeyRate = 1000, 1000/window.Seconds()
		cfg.RateLimitTimeout = 2 * time.Second // a slow answer here is CPU starvation, not an outage
		servers[i] = startServer(t, cfg)
	}
	token, _ := registerUser(t, servers[0], "many-keys@example.com")
	keys := make([]string, 6)
	for i := range keys {
		status, body := call(t, http.MethodPost, servers[i%2].URL+"/v1/api-keys", map[string]any{"name": fmt.Sprint("k", i)}, token)
		if status != http.StatusCreated {
			t.Fatalf("create key %d: %d %v", i, status, body)
		}
		keys[i] = body["secret"].(string)
	}
	const perKey = 10
	ok := make([]int, len(keys)*perKey)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range ok {
		wg.Go(func() {
			<-start
			ok[i], _ = call(t, http.MethodGet, servers[i%2].URL+"/v1/me", nil, keys[i%len(keys)])
		})
	}
	close(start)
	wg.Wait()
	allowed := 0
	for _, status := range ok {
		switch status {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d", status)
		}
	}
	// The account's limit less the token's requests that made the keys.
	if want := limit - len(keys); allowed != want {
		t.Fatalf("%d keys × %d requests: %d allowed, want the account's %d left", len(keys), perKey, allowed, want)
	}
	if status, _ := call(t, http.MethodGet, servers[1].URL+"/v1/me", nil, token); status != http.StatusTooManyRequests {
		t.Fatalf("the account's token after its keys spent the budget: %d, want 429", status)
	}
}
