package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/workers"
)

// authWindow is the sliding window of API.md's default auth limit (burst 8
// at 5/s: 8 per 1.6 s).
const authWindow = 1600 * time.Millisecond

// keyedWindow is the window of keyedConfig's auth limit: 8 per 800 s.
const keyedWindow = 800 * time.Second

// keyedConfig is limitedConfig with a burst of 8 refilled over 800 s, for
// the tests about which key a request counts against: ten logins of a
// loaded, race-instrumented run cannot spread over two of its windows, as
// they did over two of the default 1.6 s ones.
func keyedConfig(t *testing.T, dbURL string) config.Config {
	t.Helper()
	cfg := limitedConfig(t, dbURL)
	cfg.AuthRate = 8.0 / keyedWindow.Seconds()
	return cfg
}

// limitedConfig is testConfig with the default auth limits of API.md.
// Decisions wait up to 2 s for Postgres instead of 250 ms: these tests run
// several replicas and dozens of clients in one race-instrumented process on
// a shared machine, where a slow answer is the test's CPU starvation, and the
// fallback it would rightly cause is not what they measure (the fallback
// tests below and in infra/ratelimit use the short timeout).
func limitedConfig(t *testing.T, dbURL string) config.Config {
	t.Helper()
	cfg := testConfig(t, dbURL)
	cfg.AuthRate, cfg.AuthBurst = 5, 8
	cfg.RateLimitTimeout = 2 * time.Second
	return cfg
}

// peer is an HTTP client whose connections come from one loopback address,
// so the servers see it as that client IP (all of 127/8 is loopback).
type peer struct {
	ip     string
	client *http.Client
}

func newPeer(t *testing.T, ip string) *peer {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &peer{ip: ip, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// login logs in as email through srv and returns the status and headers.
// Without an email it sends an empty body: rate limited like any login, then
// answered 422 without touching the database.
func (p *peer) login(t *testing.T, srv *testServer, email string, header http.Header) (int, http.Header) {
	t.Helper()
	body := []byte(`{}`)
	if email != "" {
		body, _ = json.Marshal(map[string]string{"email": email, "password": "correct horse"})
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/auth/login", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := p.client.Do(req)
	if err != nil {
		t.Errorf("login from %s: %v", p.ip, err)
		return 0, nil
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header
}

// awaitWindowStart waits for the next window of the auth limit to begin
// (windows are aligned to the clock on every replica) and returns its start,
// so a test's burst never straddles a window boundary. It waits for an
// instant, not for an event, so there is nothing to poll.
func awaitWindowStart() time.Time {
	now := time.Now()
	start := now.Truncate(authWindow).Add(authWindow)
	time.Sleep(start.Add(20 * time.Millisecond).Sub(now))
	return start
}

// burst sends 10 logins from ip, request i to servers[i%n], and reports
// whether all were answered within one window of the given length: only
// then do they count as quick (a sliding window lets more through later,
// which a starved test machine can make happen). Short windows start the
// burst at a window start.
func burst(t *testing.T, ip string, servers []*testServer, email string, header func(i int) http.Header, window time.Duration) (statuses []int, quick bool) {
	t.Helper()
	p := newPeer(t, ip)
	start := time.Now()
	if window == authWindow {
		start = awaitWindowStart()
	}
	for i := range 10 {
		status, h := p.login(t, servers[i%len(servers)], email, header(i))
		statuses = append(statuses, status)
		if status == http.StatusTooManyRequests && (h.Get("Retry-After") == "" || h.Get("X-RateLimit-Limit") != "8" || h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Reset") == "") {
			t.Fatalf("429 headers: %v", h)
		}
	}
	if window == authWindow {
		return statuses, time.Since(start) < authWindow-50*time.Millisecond
	}
	return statuses, start.Truncate(window).Equal(time.Now().Truncate(window))
}

// burstThenLimited reports whether statuses are 8 requests let through
// (answered ok), then 429s.
func burstThenLimited(statuses []int, ok int) bool {
	for i, s := range statuses {
		if (i < 8 && s != ok) || (i >= 8 && s != http.StatusTooManyRequests) {
			return false
		}
	}
	return len(statuses) == 10
}

func noHeader(int) http.Header { return nil }

// requireBurstThenLimited sends 10 quick logins from 127.0.x.last round
// robin over servers, with header(i) added to request i, and requires the
// first 8 to pass and the rest to be refused. A burst that did not fit in
// one window is retried from another address (at most 3 times).
func requireBurstThenLimited(t *testing.T, last int, servers []*testServer, email string, header func(i int) http.Header, window time.Duration) {
	t.Helper()
	for attempt := range 3 {
		ip := "127.0." + strconv.Itoa(attempt) + "." + strconv.Itoa(last)
		statuses, quick := burst(t, ip, servers, email, header, window)
		if !quick {
			t.Logf("the burst from %s took longer than a window; again", ip)
			continue
		}
		if !burstThenLimited(statuses, http.StatusOK) {
			t.Fatalf("10 quick logins from %s round robin over %d replicas: %v, want 8 × 200 then 429", ip, len(servers), statuses)
		}
		return
	}
	t.Fatal("no burst of 10 logins fit in one window")
}

// hammer has clients goroutines log in from p as fast as they can for d,
// request i of each going to servers[i%n], and returns how many were let
// through (anything but 429).
func hammer(t *testing.T, p *peer, servers []*testServer, email string, clients int, d time.Duration) int {
	t.Helper()
	var allowed atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; time.Now().Before(deadline); i++ {
				if status, _ := p.login(t, servers[i%len(servers)], email, nil); status != http.StatusTooManyRequests && status != 0 {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(allowed.Load())
}

func TestAuthRateLimitIsOneLimitForTheCluster(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	cluster := []*testServer{
		startServer(t, limitedConfig(t, dbURL)),
		startServer(t, limitedConfig(t, dbURL)),
		startServer(t, limitedConfig(t, dbURL)),
	}
	alone := []*testServer{startServer(t, limitedConfig(t, dbtest.NewDatabaseURL(t)))}
	keyedURL := dbtest.NewDatabaseURL(t)
	keyed := []*testServer{
		startServer(t, keyedConfig(t, keyedURL)),
		startServer(t, keyedConfig(t, keyedURL)),
		startServer(t, keyedConfig(t, keyedURL)),
	}
	registerUser(t, cluster[0], "burst@example.com")
	registerUser(t, alone[0], "burst@example.com")
	registerUser(t, keyed[0], "burst@example.com")

	t.Run("round robin: 429 after the burst whichever replica answers", func(t *testing.T) {
		t.Parallel()
		requireBurstThenLimited(t, 2, keyed, "burst@example.com", noHeader, keyedWindow)
	})
	t.Run("30 concurrent clients for 3 s allow what one replica allows", func(t *testing.T) {
		t.Parallel()
		// Both bursts run at once from the same window start, the cluster's
		// spread over three replicas, the other on a replica with a database
		// of its own.
		awaitWindowStart()
		var clusterAllowed, aloneAllowed int
		var wg sync.WaitGroup
		wg.Go(func() {
			clusterAllowed = hammer(t, newPeer(t, "127.0.0.3"), cluster, "burst@example.com", 30, 3*time.Second)
		})
		wg.Go(func() {
			aloneAllowed = hammer(t, newPeer(t, "127.0.0.3"), alone, "burst@example.com", 30, 3*time.Second)
		})
		wg.Wait()
		t.Logf("allowed in 3 s from one IP: three replicas %d, one replica alone %d", clusterAllowed, aloneAllowed)
		// One limit allows the burst plus 5/s: at most 8 + 15 in 3 s.
		if aloneAllowed < 8 || aloneAllowed > 8+15 {
			t.Fatalf("one replica alone allowed %d in 3 s", aloneAllowed)
		}
		// The cluster stays under the same ceiling (three per-replica limits
		// would allow up to three times it). Comparing the two counts with
		// each other instead measured the machine's load: a busy run let the
		// lone replica answer fewer requests in its 3 s.
		if clusterAllowed < 8 || clusterAllowed > 8+15 {
			t.Fatalf("three replicas allowed %d in 3 s (one alone %d): more than one limit's 8 + 15", clusterAllowed, aloneAllowed)
		}
	})
	t.Run("different addresses do not share a limit", func(t *testing.T) {
		t.Parallel()
		requireBurstThenLimited(t, 4, keyed, "burst@example.com", noHeader, keyedWindow)
		requireBurstThenLimited(t, 5, keyed, "burst@example.com", noHeader, keyedWindow)
	})
	t.Run("a spoofed X-Forwarded-For from an untrusted peer does not change the key", func(t *testing.T) {
		t.Parallel()
		// Every request claims another address; all count against the peer's.
		requireBurstThenLimited(t, 6, keyed, "burst@example.com", func(i int) http.Header {
			return http.Header{"X-Forwarded-For": {"203.0.113." + strconv.Itoa(i)}}
		}, keyedWindow)
	})
}

func TestAuthRateLimitBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	cfg := limitedConfig(t, dbURL)
	cfg.TrustedProxies = []string{"127.0.0.1/32"}
	// 8 per 800 s: this test is about which key a request counts against,
	// so a window no loaded machine can outrun keeps the counts exact.
	cfg.AuthRate = 0.01
	srv := startServer(t, cfg)
	registerUser(t, srv, "proxied@example.com")

	proxy, other := newPeer(t, "127.0.0.1"), newPeer(t, "127.0.0.7")
	forwarded := func(xff string) http.Header { return http.Header{"X-Forwarded-For": {xff}} }
	// X-RateLimit-Remaining tells which key a request counted against.
	for i, step := range []struct {
		from      *peer
		xff       string
		remaining string
	}{
		{proxy, "203.0.113.1", "7"},
		{proxy, "203.0.113.1", "6"},
		// A client's own entries are left of what the proxy appended: the
		// right-most untrusted hop is the key.
		{proxy, "203.0.113.2, 203.0.113.1", "5"},
		{proxy, "203.0.113.1, 127.0.0.1", "4"},
		{proxy, "203.0.113.2", "7"},
		// The header from a peer that is not a trusted proxy is ignored.
		{other, "203.0.113.1", "7"},
		{other, "203.0.113.3", "6"},
	} {
		status, h := step.from.login(t, srv, "proxied@example.com", forwarded(step.xff))
		if status != http.StatusOK || h.Get("X-RateLimit-Remaining") != step.remaining {
			t.Fatalf("step %d (from %s, X-Forwarded-For %q): %d remaining %q, want 200 remaining %s",
				i, step.from.ip, step.xff, status, h.Get("X-RateLimit-Remaining"), step.remaining)
		}
	}
	// A forwarded address is limited like a direct client.
	var statuses []int
	for range 10 {
		status, _ := proxy.login(t, srv, "proxied@example.com", forwarded("198.51.100.1"))
		statuses = append(statuses, status)
	}
	if !burstThenLimited(statuses, http.StatusOK) {
		t.Fatalf("10 logins forwarded for 198.51.100.1: %v, want 8 × 200 then 429", statuses)
	}
}

func TestAuthRateLimitWhilePostgresIsLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	cfg := keyedConfig(t, dbURL)
	cfg.RateLimitTimeout = 500 * time.Millisecond
	cluster := []*testServer{startServer(t, cfg), startServer(t, cfg), startServer(t, cfg)}
	registerUser(t, cluster[0], "locked@example.com")

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "LOCK TABLE rate_limit_counters IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	// Each replica finds out on its first decision (after the timeout), then
	// counts alone.
	trigger := newPeer(t, "127.0.0.10")
	for i, srv := range cluster {
		if status, _ := trigger.login(t, srv, "locked@example.com", nil); status != http.StatusOK {
			t.Fatalf("replica %d, first request while locked: %d", i, status)
		}
		if metric(t, srv, "switchboard_ratelimit_fallback_active", "") != 1 {
			t.Fatalf("replica %d does not report its fallback", i)
		}
	}
	// Still limited, per replica: each lets its own burst through, then 429
	// (the replicas are asked at once, so that all fit in one window; the
	// logins are empty, so that the pool connections the lock holds up do
	// not slow them down).
	for attempt := 0; ; attempt++ {
		if attempt == 3 {
			t.Fatal("no burst of 10 logins fit in one window")
		}
		ip := "127.0." + strconv.Itoa(attempt) + ".11"
		statuses := make([][]int, len(cluster))
		quick := make([]bool, len(cluster))
		var wg sync.WaitGroup
		for i, srv := range cluster {
			wg.Go(func() { statuses[i], quick[i] = burst(t, ip, []*testServer{srv}, "", noHeader, keyedWindow) })
		}
		wg.Wait()
		if slices.Contains(quick, false) {
			t.Logf("a burst from %s took longer than a window; again", ip)
			continue
		}
		for i, got := range statuses {
			if !burstThenLimited(got, http.StatusUnprocessableEntity) {
				t.Fatalf("replica %d while locked: %v, want its own burst of 8 then 429", i, got)
			}
		}
		break
	}
	for i, srv := range cluster {
		if n := metric(t, srv, "switchboard_ratelimit_fallback_total", `limiter="auth"`); n < 10 {
			t.Fatalf("replica %d: fallback metric %v after 10 fallback decisions", i, n)
		}
	}

	// Released: every replica returns to Postgres (a probe per second,
	// started by requests) and the one limit applies again.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	prober := newPeer(t, "127.0.0.12")
	deadline := time.Now().Add(15 * time.Second)
	for i, srv := range cluster {
		for metric(t, srv, "switchboard_ratelimit_fallback_active", "") != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d still falls back 15 s after the lock was released", i)
			}
			prober.login(t, srv, "locked@example.com", nil)
			time.Sleep(100 * time.Millisecond)
		}
	}
	requireBurstThenLimited(t, 13, cluster, "locked@example.com", noHeader, keyedWindow)
}

func TestRateLimitPruneTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startServer(t, limitedConfig(t, dbtest.NewDatabaseURL(t)))
	now := time.Now().UTC()
	for _, age := range []time.Duration{time.Hour, 2 * time.Minute, 0} {
		if _, err := srv.pool.Exec(ctx, `INSERT INTO rate_limit_counters (key, window_start, count) VALUES ($1, $2, 1)`,
			"prune:"+age.String(), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	i := slices.IndexFunc(workers.Maintenance(srv.workerOptions()), func(m workers.MaintenanceTask) bool { return m.Name == "ratelimit_prune" })
	if i < 0 {
		t.Fatal("no ratelimit_prune maintenance task")
	}
	task := workers.Maintenance(srv.workerOptions())[i]
	n, err := task.Run(ctx)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want the two windows older than the retention (about a minute)", n, err)
	}
	var left int
	if err := srv.pool.QueryRow(ctx, `SELECT count(*) FROM rate_limit_counters WHERE key LIKE 'prune:%'`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d windows left (%v), want the current one", left, err)
	}
	if task.Every != time.Minute || task.Name == "" {
		t.Fatalf("task %+v", task)
	}
}
