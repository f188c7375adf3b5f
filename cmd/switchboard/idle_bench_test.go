package main

import (
	"cmp"
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// idleSources names where an idle replica's statements come from, by what
// their text matches (the first match wins); anything else is "other".
var idleSources = []struct {
	name string
	re   *regexp.Regexp
}{
	{"tx-control", regexp.MustCompile(`(?i)^\s*(begin|commit|rollback)\b`)},
	{"claim-loop", regexp.MustCompile(`FROM\s+tasks\s+WHERE\s+active`)},
	{"maintenance", regexp.MustCompile(`maintenance_schedule`)},
	{"heartbeat", regexp.MustCompile(`cluster_nodes`)},
	{"river-fetch", regexp.MustCompile(`JobGetAvailable`)},
	{"river-elector", regexp.MustCompile(`Leader`)},
	{"river-scheduler", regexp.MustCompile(`JobSchedule\b`)},
	{"river-reports", regexp.MustCompile(`JobCountByAllStates|QueueGet|JobGetStuck`)},
}

// BenchmarkIdleReplica starts one replica (web and worker, the real
// wiring with the default SWITCHBOARD_RIVER_PARK_AFTER) on a database of
// its own, waits until its River client parks (parked-after-s: how long
// that took from the start, nothing having happened), lets it settle for
// 2 s, and counts its transactions for 60 s of doing nothing
// (pg_stat_database of its database). Where the server has
// pg_stat_statements loaded (point TEST_DATABASE_URL at one started with
// shared_preload_libraries=pg_stat_statements) it also counts statements,
// BEGIN and COMMIT included, by source; round-trips/s is their sum plus
// the pings, which pg_stat_statements does not see (empty queries): the
// bus's of its LISTEN connection and the pool's of a connection idle for
// over db.PingIdleAfter before it hands it out. A second replica
// (the same wiring, connecting as a role of its own so that its statements
// count apart) then starts on the same database, parks, settles, and its
// statements over 60 s are the follower-… figures: what each further
// replica costs. The first replica was River's leader until it parked;
// parked, neither is. On a shared server whose pg_stat_statements fills
// up, evicted entries make the figures lower bounds; pgss-deallocs counts
// the evictions meanwhile. The baseline, river_always_running, is the
// same with SWITCHBOARD_RIVER_PARK_AFTER=0 (River never parks; 10 s to
// settle instead of the wait to park).
//
//	go test -run '^$' -bench IdleReplica -benchtime 1x ./cmd/switchboard/
func BenchmarkIdleReplica(b *testing.B) {
	b.Run("parks", func(b *testing.B) { idleReplica(b, 30*time.Second) }) // SWITCHBOARD_RIVER_PARK_AFTER's default
	b.Run("river_always_running", func(b *testing.B) { idleReplica(b, 0) })
}

func idleReplica(b *testing.B, parkAfter time.Duration) {
	ctx := context.Background()
	// The follower's role, dropped last: after its database (it owns
	// what it made there).
	role := "sb_idle_" + uuid.NewString()[:8]
	b.Cleanup(func() { dropIdleRole(b, role) })
	dbURL := dbtest.NewDatabaseURL(b)
	u, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin, err := pgx.Connect(ctx, dbtest.AdminURL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	var preloaded bool
	if err := admin.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'`).Scan(&preloaded); err != nil {
		b.Fatal(err)
	}
	if preloaded {
		if _, err := admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			b.Fatal(err)
		}
	}
	srv := startIdleReplica(b, dbURL, "", parkAfter)
	x0 := idleXacts(b, admin, name)
	s0, d0, err0 := idleStatements(ctx, admin, name, "")
	p0 := idlePings(b, srv)
	const idle = 60 * time.Second
	start := time.Now()
	time.Sleep(idle)
	elapsed := time.Since(start).Seconds()
	x1 := idleXacts(b, admin, name)
	b.ReportMetric(float64(x1-x0)/elapsed, "xacts/s")
	s1, d1, err1 := idleStatements(ctx, admin, name, "")
	pings := idlePings(b, srv).rate(p0, elapsed)
	if err := cmp.Or(err0, err1); err != nil && preloaded {
		b.Logf("no statement counts: %v", err)
	}
	if err0 == nil && err1 == nil {
		reportIdleStatements(b, "", s0, s1, d0, d1, elapsed, pings)
		if testing.Verbose() {
			logIdleStatements(ctx, b, admin, name, "")
		}
		idleFollower(ctx, b, admin, u, name, role, parkAfter)
	}
	b.ReportMetric(0, "ns/op")
}

// startIdleReplica starts a replica on dbURL that parks River after
// parkAfter (0: never), waits for River to park (reporting how long that
// took as prefix+"parked-after-s") and for 2 s more, or, never parking, 10 s.
func startIdleReplica(b *testing.B, dbURL, prefix string, parkAfter time.Duration) *testServer {
	cfg := testConfig(b, dbURL)
	cfg.RiverParkAfter = parkAfter
	begun := time.Now()
	srv := startServer(b, cfg)
	if parkAfter == 0 {
		time.Sleep(10 * time.Second) // settle: an interval to wait out, not an event
		return srv
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !srv.jobs.queue.River().Parked() {
		if time.Now().After(deadline) {
			b.Fatalf("River did not park within 3 minutes of idling")
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.ReportMetric(time.Since(begun).Seconds(), prefix+"parked-after-s")
	time.Sleep(2 * time.Second) // settle, as above
	return srv
}

// idlePings is how many round trips the replica spent on pings so far:
// the bus's of its LISTEN connection (switchboard_bus_listen_pings_total)
// and its pool's before handing out a connection idle for over
// db.PingIdleAfter (db.Pings). pg_stat_statements sees neither.
func idlePings(b *testing.B, srv *testServer) pingCounts {
	families, err := srv.registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "switchboard_bus_listen_pings_total" {
			return pingCounts{listen: f.GetMetric()[0].GetCounter().GetValue(), pool: float64(db.Pings(srv.pool))}
		}
	}
	b.Fatal("no switchboard_bus_listen_pings_total")
	return pingCounts{}
}

// pingCounts are counts of pings, or rates of them.
type pingCounts struct{ listen, pool float64 }

// rate is the pings per second since p0.
func (p pingCounts) rate(p0 pingCounts, elapsed float64) pingCounts {
	return pingCounts{listen: (p.listen - p0.listen) / elapsed, pool: (p.pool - p0.pool) / elapsed}
}

// idleFollower starts a second replica on the database, connecting as a
// new role, and reports its statements per second by source, prefixed
// "follower-".
func idleFollower(ctx context.Context, b *testing.B, admin *pgx.Conn, u *url.URL, name, role string, parkAfter time.Duration) {
	if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN SUPERUSER`); err != nil {
		b.Fatal(err)
	}
	fu := *u
	fu.User = url.User(role)
	srv := startIdleReplica(b, fu.String(), "follower-", parkAfter)
	s0, d0, err0 := idleStatements(ctx, admin, name, role)
	p0 := idlePings(b, srv)
	start := time.Now()
	time.Sleep(60 * time.Second)
	elapsed := time.Since(start).Seconds()
	s1, d1, err1 := idleStatements(ctx, admin, name, role)
	pings := idlePings(b, srv).rate(p0, elapsed)
	if err := cmp.Or(err0, err1); err != nil {
		b.Fatalf("follower statements: %v", err)
	}
	reportIdleStatements(b, "follower-", s0, s1, d0, d1, elapsed, pings)
	if testing.Verbose() {
		logIdleStatements(ctx, b, admin, name, role)
	}
}

// dropIdleRole drops the follower's role, if it was made.
func dropIdleRole(b *testing.B, role string) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbtest.AdminURL(b))
	if err != nil {
		b.Logf("drop role %s: %v", role, err)
		return
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `DROP ROLE IF EXISTS `+role); err != nil {
		b.Logf("drop role %s: %v", role, err)
	}
}

// reportIdleStatements reports the statements per second by source between
// two readings and the pings per second (LISTEN's, the pool's), and their
// sum as round-trips/s, each name after prefix.
// On a shared server whose pg_stat_statements is full, entries are
// evicted: one evicted and made again counts from 0 (its calls since),
// one evicted for good is lost, so the figures are then lower bounds —
// pgss-deallocs (evictions during the reading, anywhere on the server)
// says when.
func reportIdleStatements(b *testing.B, prefix string, s0, s1 map[string]idleStatement, d0, d1 int64, elapsed float64, pings pingCounts) {
	bySource := map[string]int64{}
	for key, st := range s1 {
		n := st.calls - s0[key].calls
		if n < 0 {
			n = st.calls
		}
		bySource[st.source] += n
	}
	total := 0.0
	for _, src := range append(idleSourceNames(), "other") {
		d := float64(bySource[src]) / elapsed
		total += d
		b.ReportMetric(d, prefix+src+"-stmts/s")
	}
	b.ReportMetric(pings.listen, prefix+"listen-pings/s")
	b.ReportMetric(pings.pool, prefix+"pool-pings/s")
	b.ReportMetric(total+pings.listen+pings.pool, prefix+"round-trips/s")
	b.ReportMetric(float64(d1-d0), prefix+"pgss-deallocs")
}

func idleSourceNames() []string {
	names := make([]string, len(idleSources))
	for i, s := range idleSources {
		names[i] = s.name
	}
	return names
}

// idleXacts is the transactions committed and rolled back in database name.
func idleXacts(b *testing.B, admin *pgx.Conn, name string) int64 {
	b.Helper()
	ctx := context.Background()
	// Statistics reach the shared counters when a backend flushes them (at
	// most once a second, and within 10 s for an idle one); a snapshot
	// cleared first reads the latest.
	_, _ = admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
	var n int64
	if err := admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`, name).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// idleStatement is one pg_stat_statements entry: its source and calls.
type idleStatement struct {
	source string
	calls  int64
}

// idleStatements is the statements run in database name (by role, unless
// "") by entry, when pg_stat_statements can say; dealloc is how many times
// the server evicted entries so far (pg_stat_statements.max filled); an
// error where it cannot say.
// (A query text pg_stat_statements could not keep reads as NULL: "other".)
func idleStatements(ctx context.Context, admin *pgx.Conn, name, role string) (stmts map[string]idleStatement, dealloc int64, err error) {
	if err := admin.QueryRow(ctx, `SELECT dealloc FROM pg_stat_statements_info`).Scan(&dealloc); err != nil {
		return nil, 0, err
	}
	rows, err := admin.Query(ctx, `
		SELECT s.userid::text || '/' || s.queryid::text || '/' || s.toplevel::text, coalesce(s.query, ''), s.calls
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		JOIN pg_roles r ON r.oid = s.userid
		WHERE d.datname = $1 AND ($2 = '' OR r.rolname = $2)`, name, role)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := map[string]idleStatement{}
	for rows.Next() {
		var key, q string
		var calls int64
		if err := rows.Scan(&key, &q, &calls); err != nil {
			return nil, 0, err
		}
		out[key] = idleStatement{source: idleSource(q), calls: calls}
	}
	return out, dealloc, rows.Err()
}

func idleSource(query string) string {
	for _, s := range idleSources {
		if s.re.MatchString(query) {
			return s.name
		}
	}
	return "other"
}

// logIdleStatements logs every statement of database name (by role,
// unless "") with its calls since the database was made, most frequent
// first: with -v, where each source's figure comes from.
func logIdleStatements(ctx context.Context, b *testing.B, admin *pgx.Conn, name, role string) {
	rows, err := admin.Query(ctx, `
		SELECT s.calls, coalesce(regexp_replace(left(s.query, 160), '\s+', ' ', 'g'), '') FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid JOIN pg_roles r ON r.oid = s.userid
		WHERE d.datname = $1 AND ($2 = '' OR r.rolname = $2) ORDER BY s.calls DESC LIMIT 25`, name, role)
	if err != nil {
		b.Logf("statements: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var calls int64
		var q string
		if rows.Scan(&calls, &q) == nil {
			b.Logf("%s%6d calls  %-15s %s", role, calls, idleSource(q), q)
		}
	}
}
