package workers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// BenchmarkThroughputCosts runs BenchmarkThroughput's four phases, and
// BenchmarkThroughputFloor's floor runs after the no-op jobs, and prints
// what each job or run costs: statements, statement time and WAL
// records (pg_stat_statements, on this benchmark's database only; never
// reset, it is shared), and CPU of this process and of its Postgres
// backends (/proc). CPU is steadier than the rates on a shared machine.
// It skips when pg_stat_statements or /proc cannot be read.
//
//	go test ./workers/ -run '^$' -bench ThroughputCosts -benchtime 1x -count 3
func BenchmarkThroughputCosts(b *testing.B) {
	const count = 5000
	ctx := context.Background()
	n := newBenchNode(b, nil)
	stats := openStatStatements(b, n)
	if err := n.claimer.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer n.claimer.Stop()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer target.Close()

	// events is how many events the runs so far stored: a phase's costs
	// are read once its last run's succeeded event is stored too (it
	// follows the status the phase waits for).
	events := 0
	measure := func(name, done string, start func()) {
		before, cpu := stats.read(b), readCPU(b, n)
		n.rate(b, count, done, start)
		waitCount(b, n, events, time.Minute, `SELECT coalesce(sum(last_offset), 0)::int FROM stream_heads`)
		c, s := readCPU(b, n).since(cpu), stats.read(b).since(before)
		per := float64(count)
		b.ReportMetric(s.calls/per, name+"_stmts/op")
		b.ReportMetric(s.ms*1000/per, name+"_stmt_us/op")
		b.ReportMetric(s.wal/per, name+"_wal_records/op")
		b.ReportMetric(float64(c.self.Microseconds())/per, name+"_go_cpu_us/op")
		b.ReportMetric(float64(c.backends.Microseconds())/per, name+"_pg_cpu_us/op")
	}
	measure("noop", `SELECT count(*) FROM river_job WHERE kind = 'bench_noop' AND state = 'completed'`, func() {
		params := make([]river.InsertManyParams, count)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := n.river.InsertManyFast(ctx, params); err != nil {
			b.Fatal(err)
		}
	})
	n.claimer.SetPaused(true)
	n.createTasks(b, count, "@every 1h", publishAction, time.Now().Add(-100*time.Millisecond))
	var wait func() error
	measure("floor", `SELECT count(*) FROM river_job WHERE kind = 'bench_noop' AND state = 'completed'`, func() { wait = n.startFloor(ctx) })
	if err := wait(); err != nil {
		b.Fatal(err)
	}
	for _, a := range []struct {
		name, action string
		silent       bool
		events       int // stored per run
	}{
		{"publish", publishAction, false, 4},
		{"webhook", fmt.Sprintf(`{"type":"webhook","url":%q}`, target.URL+"/hook"), false, 3},
		{"silent", publishAction, true, 0},
	} {
		n.pub.silent.Store(a.silent)
		events += a.events * count
		n.claimer.SetPaused(true)
		n.createTasks(b, count, "@every 1h", a.action, time.Now().Add(-100*time.Millisecond))
		measure(a.name, `SELECT count(*) FROM task_runs WHERE status = 'succeeded'`, func() { n.claimer.SetPaused(false) })
	}
	b.ReportMetric(0, "ns/op")
}

// statStatements reads pg_stat_statements (a view of the server's
// maintenance database) for one database.
type statStatements struct {
	conn *pgx.Conn
	db   string
}

type statementTotals struct{ calls, ms, wal float64 }

func (t statementTotals) since(u statementTotals) statementTotals {
	return statementTotals{t.calls - u.calls, t.ms - u.ms, t.wal - u.wal}
}

func openStatStatements(b *testing.B, n *benchNode) *statStatements {
	ctx := context.Background()
	s := &statStatements{}
	if err := n.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&s.db); err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, os.Getenv("TEST_DATABASE_URL"))
	if err != nil {
		b.Skipf("pg_stat_statements: %v", err)
	}
	b.Cleanup(func() { _ = conn.Close(context.Background()) })
	s.conn = conn
	if _, err := conn.Exec(ctx, `SELECT 1 FROM pg_stat_statements LIMIT 1`); err != nil {
		b.Skipf("pg_stat_statements: %v", err)
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skipf("no /proc: %v", err)
	}
	return s
}

func (s *statStatements) read(b *testing.B) statementTotals {
	var t statementTotals
	err := s.conn.QueryRow(context.Background(), `
		SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(total_exec_time), 0)::float8, coalesce(sum(wal_records), 0)::float8
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`, s.db).Scan(&t.calls, &t.ms, &t.wal)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// cpuTimes is the CPU this process and the benchmark database's backends
// have used.
type cpuTimes struct {
	self     time.Duration
	backends time.Duration
	byPID    map[int]time.Duration
}

func (c cpuTimes) since(d cpuTimes) cpuTimes {
	out := cpuTimes{self: c.self - d.self}
	for pid, t := range c.byPID {
		out.backends += t - d.byPID[pid] // a backend new since d counts whole
	}
	return out
}

func readCPU(b *testing.B, n *benchNode) cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	c := cpuTimes{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), byPID: map[int]time.Duration{}}
	rows, err := n.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	for _, pid := range pids {
		if t, ok := procCPU(int(pid)); ok {
			c.byPID[int(pid)] = t
		}
	}
	return c
}

// procCPU is a process's user plus system time from /proc/<pid>/stat
// (clock ticks of 10 ms, the Linux default USER_HZ).
func procCPU(pid int) (time.Duration, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(fields[11], 10, 64)
	sys, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * 10 * time.Millisecond, true
}
