package jobs

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/quota"
)

// BenchmarkTriggerQuota: what the queued_runs quota adds to one trigger —
// its lock and count, one round trip in the trigger's transaction — with
// 0, 100 and 1 000 runs of the project not yet final, beside a whole
// Trigger (which includes it) on the same database; milliseconds min,
// median and max of 200 each, and the load average at the end.
//
//	go test -run '^$' -bench TriggerQuota -benchtime 1x ./jobs/
func BenchmarkTriggerQuota(b *testing.B) {
	const rounds = 200
	ctx := context.Background()
	tb := setup(b)
	task := tb.task(b, func(t *Task) { t.Schedule, t.Overlap = nil, OverlapAllow })
	lim := quota.Limits{QueuedRuns: 1_000_000}
	backlog := 0
	for _, want := range []int{0, 100, 1000} {
		if n := want - backlog; n > 0 {
			if _, err := TriggerBatch(ctx, tb.pool, tb.river, lim, tb.project, task.ID, make([]TriggerRequest, n)); err != nil {
				b.Fatal(err)
			}
			backlog = want
		}
		report(b, fmt.Sprintf("quota_%d_queued", want), timeRounds(b, rounds, func() (time.Duration, error) {
			tx, err := tb.pool.Begin(ctx)
			if err != nil {
				return 0, err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			start := time.Now()
			err = takeQueuedRuns(ctx, tx, lim, tb.project, 1)
			return time.Since(start), err
		}))
	}
	report(b, "trigger", timeRounds(b, rounds, func() (time.Duration, error) {
		start := time.Now()
		_, err := Trigger(ctx, tb.pool, tb.river, lim, TriggerRequest{ProjectID: tb.project, TaskID: task.ID})
		return time.Since(start), err
	}))
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average: %s", strings.TrimSpace(string(load)))
	}
	b.ReportMetric(0, "ns/op")
}

// timeRounds runs f rounds times and returns the times it measured, in ms.
func timeRounds(b *testing.B, rounds int, f func() (time.Duration, error)) []float64 {
	ms := make([]float64, 0, rounds)
	for range rounds {
		d, err := f()
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, float64(d.Microseconds())/1000)
	}
	return ms
}

func report(b *testing.B, name string, ms []float64) {
	slices.Sort(ms)
	b.ReportMetric(ms[0], name+"-min-ms")
	b.ReportMetric(ms[len(ms)/2], name+"-median-ms")
	b.ReportMetric(ms[len(ms)-1], name+"-max-ms")
}
