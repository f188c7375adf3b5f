package main

import (
	"strings"
	"testing"
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
