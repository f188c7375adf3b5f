package web

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// BenchmarkRateLimitedRoute compares a rate-limited route with our Postgres
// counter (a busy key takes shares of its window, one statement each, and
// decides from them in memory; no process-wide lock), with httprate's
// stock in-memory limiter, and with httprate's stock limiter around the same
// Postgres counter (its mutex spans the round trips). Each client has a key
// of its own and stays under the limit, so every request is allowed and
// counted. The store waits up to 5 s for Postgres so that every decision of
// the "postgres" rows is made there (fallback-% says so); the pool has a
// connection per client.
//
// Postgres is on loopback here, so one client is already bound by the CPU
// the benchmark, Postgres and everything else on the machine share. The
// rtt=1ms rows hold the connection 1 ms longer per statement, as a database
// across a network does: concurrency then shows whether decisions overlap
// (ours) or queue behind one lock (httprate's stock limiter). Run:
//
//	go test -run '^$' -bench RateLimitedRoute -benchtime 2s ./web/
func BenchmarkRateLimitedRoute(b *testing.B) {
	pool, err := db.Connect(context.Background(), dbtest.NewDatabaseURL(b), db.Options{MaxConns: 64})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	const limit, window = 1 << 30, time.Second
	rate := ratelimit.Rate{PerSecond: limit, Burst: limit}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	byPeer := func(r *http.Request) (string, error) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		return host, err
	}
	far := rttDB{pool: pool, rtt: time.Millisecond}
	ours := func(db ratelimit.DB) (http.Handler, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		store := ratelimit.NewStore(ratelimit.Options{DB: db, Registry: reg, Timeout: 5 * time.Second})
		return limitHTTP(store.Limiter("bench", rate), byPeer)(ok), reg
	}
	stock := func(db ratelimit.DB) http.Handler {
		return httprate.LimitBy(limit, window, byPeer, httprate.WithLimitCounter(ratelimit.NewCounter(db, 0)))(ok)
	}
	near, nearReg := ours(pool)
	farHandler, farReg := ours(far)
	routes := []struct {
		name    string
		handler http.Handler
		reg     *prometheus.Registry // of our store, to check it never fell back
	}{
		{"httprate-memory", httprate.LimitBy(limit, window, byPeer)(ok), nil},
		{"postgres", near, nearReg},
		{"httprate-postgres-stock", stock(pool), nil},
		{"postgres/rtt=1ms", farHandler, farReg},
		{"httprate-postgres-stock/rtt=1ms", stock(far), nil},
	}
	for _, route := range routes {
		for _, clients := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", route.name, clients), func(b *testing.B) {
				before := decisions(b, route.reg)
				benchClients(b, route.handler, clients)
				if after := decisions(b, route.reg); after.total > before.total {
					b.ReportMetric(100*(after.fallback-before.fallback)/(after.total-before.total), "fallback-%")
				}
			})
		}
	}
}

// benchClients sends b.N requests from clients goroutines, each with its
// own client address, and reports throughput and latency percentiles.
func benchClients(b *testing.B, h http.Handler, clients int) {
	perClient := max(b.N/clients, 1)
	latencies := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			peer := fmt.Sprintf("10.%d.%d.1:1000", c/256, c%256)
			lat := make([]time.Duration, 0, perClient)
			for range perClient {
				req := httptest.NewRequest(http.MethodGet, "/bench", nil)
				req.RemoteAddr = peer
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				lat = append(lat, time.Since(t0))
				if rec.Code != http.StatusNoContent {
					b.Errorf("status %d: %s", rec.Code, rec.Body)
					return
				}
			}
			latencies[c] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op") // req/s and the percentiles say it better
}

// rttDB holds each statement's connection rtt longer, like a database
// across a network.
type rttDB struct {
	pool *pgxpool.Pool
	rtt  time.Duration
}

func (d rttDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	time.Sleep(d.rtt)
	return c.Exec(ctx, sql, args...)
}

func (d rttDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	time.Sleep(d.rtt)
	return releasingRow{Row: c.QueryRow(ctx, sql, args...), conn: c}
}

type releasingRow struct {
	pgx.Row
	conn *pgxpool.Conn
}

func (r releasingRow) Scan(dest ...any) error {
	defer r.conn.Release()
	return r.Row.Scan(dest...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type counts struct{ total, fallback float64 }

// decisions sums the store's decision counters.
func decisions(b *testing.B, reg *prometheus.Registry) counts {
	if reg == nil {
		return counts{}
	}
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var c counts
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "switchboard_ratelimit_decisions_total":
				c.total += m.GetCounter().GetValue()
			case "switchboard_ratelimit_fallback_total":
				c.fallback += m.GetCounter().GetValue()
			}
		}
	}
	return c
}

// limitHTTP is the Huma middlewares' decision (Server.limit) as plain
// net/http middleware, so the benchmark compares limiters on equal routes.
func limitHTTP(l *ratelimit.Limiter, key httprate.KeyFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, err := key(r)
			if err != nil {
				writeProblem(w, http.StatusBadRequest, err.Error())
				return
			}
			d := l.Allow(r.Context(), k)
			setRateHeaders(w.Header().Set, d)
			if !d.Allowed {
				writeProblem(w, http.StatusTooManyRequests, tooManyDetail(d, "from this address"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// BenchmarkRateLimitedRouteRatio is BenchmarkRateLimitedRoute's comparison
// made robust to a shared machine's changing load: the in-process limiter
// and ours take turns, 300 ms each, twenty turns each per client count, and
// ratio is our requests over theirs in the same turns. Same route, keys,
// limit and store settings as BenchmarkRateLimitedRoute's "postgres" row.
//
//	go test -run '^$' -bench RateLimitedRouteRatio -benchtime 1x ./web/
func BenchmarkRateLimitedRouteRatio(b *testing.B) {
	pool, err := db.Connect(context.Background(), dbtest.NewDatabaseURL(b), db.Options{MaxConns: 64})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	const limit, window = 1 << 30, time.Second
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	byPeer := func(r *http.Request) (string, error) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		return host, err
	}
	reg := prometheus.NewRegistry()
	store := ratelimit.NewStore(ratelimit.Options{DB: pool, Registry: reg, Timeout: 5 * time.Second})
	ours := limitHTTP(store.Limiter("bench", ratelimit.Rate{PerSecond: limit, Burst: limit}), byPeer)(ok)
	memory := httprate.LimitBy(limit, window, byPeer)(ok)
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			const turns, turn = 20, 300 * time.Millisecond
			var n [2]int
			before := postgresTime(b, reg)
			for range turns {
				n[0] += clientsFor(b, memory, clients, turn)
				n[1] += clientsFor(b, ours, clients, turn)
			}
			secs := (turns * turn).Seconds()
			b.ReportMetric(float64(n[0])/secs, "memory-req/s")
			b.ReportMetric(float64(n[1])/secs, "postgres-req/s")
			b.ReportMetric(float64(n[1])/float64(max(n[0], 1)), "ratio")
			// The share of our clients' time spent waiting for Postgres.
			after := postgresTime(b, reg)
			b.ReportMetric(100*(after.seconds-before.seconds)/(secs*float64(clients)), "waiting-%")
			b.ReportMetric(float64(after.statements-before.statements)/secs, "statements/s")
			if store.FallingBack() {
				b.Error("the store fell back: the figures are not Postgres decisions")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// clientsFor sends requests from clients goroutines (one client address
// each) for d and returns how many were answered.
func clientsFor(b *testing.B, h http.Handler, clients int, d time.Duration) int {
	var total atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for c := range clients {
		wg.Go(func() {
			peer := fmt.Sprintf("10.%d.%d.1:1000", c/256, c%256)
			n := int64(0)
			for time.Now().Before(end) {
				req := httptest.NewRequest(http.MethodGet, "/bench", nil)
				req.RemoteAddr = peer
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusNoContent {
					b.Errorf("status %d: %s", rec.Code, rec.Body)
					return
				}
				n++
			}
			total.Add(n)
		})
	}
	wg.Wait()
	return int(total.Load())
}

type pgTime struct {
	seconds    float64
	statements uint64
}

// postgresTime is what the store's latency histogram has summed so far.
func postgresTime(b *testing.B, reg *prometheus.Registry) pgTime {
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "switchboard_ratelimit_postgres_duration_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			return pgTime{h.GetSampleSum(), h.GetSampleCount()}
		}
	}
	return pgTime{}
}
