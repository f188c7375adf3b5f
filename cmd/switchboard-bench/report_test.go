package main

import (
	"strings"
	"testing"
	"time"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/switchboard/switchboard/web
cpu: Some CPU @ 2.0GHz
BenchmarkAuthLimit/postgres/clients=8-2         	    1000	    812345 ns/op	      1234 req/s	   3.1 p50-ms	   9.8 p99-ms
BenchmarkAuthLimit/httprate-memory/clients=8-2  	    1000	     12345 ns/op	     80000 req/s	   0.1 p50-ms	   0.4 p99-ms
BenchmarkAuthLimit/postgres/clients=64
    limit_test.go:10: some log line
BenchmarkClaim-2   	       1	2000000000 ns/op	  450.0 publish-runs/s	 900.0 river-noop-jobs/s
BenchmarkIdleConnectionMemory-2   	       1	   4905353403 ns/op	  33.18 KiB/conn
BenchmarkDeliveryLatency-2   	       1	         200.0 same-p50-µs	 900.0 same-p99-µs	 400.0 cross-p50-µs	 1800 cross-p99-µs
BenchmarkThroughput/river_noop_jobs-2         	       1	      2000 jobs/s
BenchmarkThroughput/publish_task_runs-2       	       1	       500.0 runs/s
PASS
`

func TestParse(t *testing.T) {
	t.Parallel()
	rs, m := parse(sample)
	if m.CPU != "Some CPU @ 2.0GHz" {
		t.Errorf("cpu %q", m.CPU)
	}
	if len(rs) != 7 {
		t.Fatalf("parsed %d results, want 7: %v", len(rs), rs)
	}
	if rs[0].Name != "AuthLimit/postgres/clients=8" || rs[0].Iterations != 1000 || len(rs[0].Metrics) != 4 {
		t.Errorf("first result %+v", rs[0])
	}
	if got := rs[2].Metrics[1]; got.Unit != "publish-runs/s" || got.Value != 450 {
		t.Errorf("custom metric %+v", got)
	}
}

func TestBaselines(t *testing.T) {
	t.Parallel()
	rs, _ := parse(sample)
	base := baselines(rs)
	if j, ok := base[0]; !ok || j != 1 {
		t.Fatalf("postgres benchmark's baseline: %v", base)
	}
	if _, ok := base[1]; ok {
		t.Error("a baseline has a baseline")
	}
	for i, j := range base {
		if rs[i].Name == "DeliveryLatency" {
			t.Errorf("DeliveryLatency paired with %s: only sub-benchmarks pair", rs[j].Name)
		}
	}
	var b strings.Builder
	writeTable(&b, rs)
	out := b.String()
	for _, want := range []string{"`AuthLimit/httprate-memory/clients=8`", "req/s 0.0154×", "cross-p50-µs ÷ same-p50-µs = 2.00×", "cross-p99-µs ÷ same-p99-µs = 2.00×",
		"| `IdleConnectionMemory` | 33.18 KiB/conn |", "`Throughput/publish_task_runs` | 500.0 runs/s | `Throughput/river_noop_jobs` | 2000 jobs/s | runs/s ÷ jobs/s = 0.25×"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestKeep: with -keep, packages this run measured nothing in keep their
// previous sections with the date they were measured, through several
// partial runs; the packages it measured are rewritten.
func TestKeep(t *testing.T) {
	t.Parallel()
	rs, _ := parse(sample)
	first := &report{date: time.Date(2026, 11, 30, 4, 15, 0, 0, time.UTC), goVersion: "go1"}
	first.add("./web", nil, rs[:2], meta{}, nil, [2]string{})
	first.add("./workers", nil, rs[5:], meta{}, nil, [2]string{})
	old := first.markdown(options{bench: "."})

	second := &report{date: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), goVersion: "go1"}
	second.keep(old)
	second.add("./realtime", nil, rs[3:5], meta{}, nil, [2]string{})
	second.add("./web", nil, nil, meta{}, nil, [2]string{}) // matched nothing this time
	mid := second.markdown(options{bench: "Idle|Delivery", keep: true})

	third := &report{date: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), goVersion: "go1"}
	third.keep(mid)
	third.add("./workers", nil, rs[5:6], meta{}, nil, [2]string{})
	out := third.markdown(options{bench: "Throughput/river", keep: true})

	for _, want := range []string{
		"## `./realtime`\n\n_Not rerun: kept (-keep) from the report of 2026-12-01 10:00 UTC._\n\n",
		"## `./web`\n\n_Not rerun: kept (-keep) from the report of 2026-11-30 04:15 UTC._\n\n",
		"`AuthLimit/httprate-memory/clients=8`",
		"| `IdleConnectionMemory` | 33.18 KiB/conn |",
		"| date | 2026-12-02 10:00 UTC |",
		"-bench 'Throughput/river' -keep",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "publish_task_runs") {
		t.Errorf("./workers was rerun but its old rows stayed:\n%s", out)
	}
	if n := strings.Count(out, "## `"); n != 3 {
		t.Errorf("%d sections, want 3:\n%s", n, out)
	}
	if strings.Index(out, "`./realtime`") > strings.Index(out, "`./web`") || strings.Index(out, "`./web`") > strings.Index(out, "`./workers`") {
		t.Errorf("sections out of order:\n%s", out)
	}
}

// TestRepeatedRuns: with -count 3 a benchmark's three results become one
// row with min / median / max per figure, and its ratio to the baseline is
// taken run by run (each run beside the baseline measured with it).
func TestRepeatedRuns(t *testing.T) {
	t.Parallel()
	rs, _ := parse(`BenchmarkThroughput/river_noop_jobs-2   1   2000 jobs/s
BenchmarkThroughput/publish_task_runs-2 1   1000 runs/s
BenchmarkThroughput/river_noop_jobs-2   1   4000 jobs/s
BenchmarkThroughput/publish_task_runs-2 1   3600 runs/s
BenchmarkThroughput/river_noop_jobs-2   1   3000 jobs/s
BenchmarkThroughput/publish_task_runs-2 1   2100 runs/s
BenchmarkDeliveryLatency-2   1   200.0 same-p50-µs   400.0 cross-p50-µs
BenchmarkDeliveryLatency-2   1   100.0 same-p50-µs   300.0 cross-p50-µs
BenchmarkDeliveryLatency-2   1   300.0 same-p50-µs   300.0 cross-p50-µs
`)
	r := &report{date: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), goVersion: "go1"}
	r.add("./workers", nil, rs, meta{}, nil, [2]string{"1.50", "2.25"})
	out := r.markdown(options{bench: ".", count: 3})
	for _, want := range []string{
		"| `Throughput/publish_task_runs` | 1000 / 2100 / 3600 runs/s | `Throughput/river_noop_jobs` | 2000 / 3000 / 4000 jobs/s | runs/s ÷ jobs/s = 0.5 / 0.7 / 0.9× |",
		"100.0 / 200.0 / 300.0 same-p50-µs<br>300.0 / 300.0 / 400.0 cross-p50-µs",
		"cross-p50-µs ÷ same-p50-µs = 1.00 / 2.00 / 3.00×",
		"Load average (1 min) 1.50 when this package started, 2.25 when it ended.",
		"-count 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "`Throughput/publish_task_runs`"); n != 1 {
		t.Errorf("publish_task_runs appears in %d rows, want 1:\n%s", n, out)
	}
}
