package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/quota"
)

// BenchmarkTriggerBatch: TriggerBatch of 1 000 items (each with a payload
// and an idempotency key: runs, keys and River jobs in one transaction,
// no HTTP, no announcement) beside River's InsertMany of 1 000 run jobs on
// the same database, rounds alternating in the same run; runs/s min,
// median and max, and the load average at the end.
//
//	go test -run '^$' -bench TriggerBatch -benchtime 1x ./jobs/
func BenchmarkTriggerBatch(b *testing.B) {
	const rounds, size = 15, 1000
	ctx := context.Background()
	tb := setup(b)
	task := tb.task(b, func(t *Task) { t.Schedule, t.Overlap = nil, OverlapAllow })
	var batch, baseline []float64
	for r := range rounds {
		items := make([]TriggerRequest, size)
		params := make([]river.InsertManyParams, size)
		for i := range items {
			items[i] = TriggerRequest{IdempotencyKey: fmt.Sprintf("r%d-%d", r, i), Payload: json.RawMessage(fmt.Sprintf(`{"order":%d}`, i))}
			params[i] = river.InsertManyParams{Args: RunArgs{RunID: fmt.Sprintf("r%d-%d", r, i), TaskID: task.ID}, InsertOpts: runInsertOpts("", 3, 1)}
		}
		start := time.Now()
		if _, err := TriggerBatch(ctx, tb.pool, tb.river, quota.Limits{QueuedRuns: rounds * size}, tb.project, task.ID, items); err != nil {
			b.Fatal(err)
		}
		batch = append(batch, size/time.Since(start).Seconds())
		start = time.Now()
		if _, err := tb.river.InsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
		baseline = append(baseline, size/time.Since(start).Seconds())
	}
	for name, xs := range map[string][]float64{"trigger_batch": batch, "river_insertmany": baseline} {
		slices.Sort(xs)
		b.ReportMetric(xs[0], name+"-min-runs/s")
		b.ReportMetric(xs[len(xs)/2], name+"-median-runs/s")
		b.ReportMetric(xs[len(xs)-1], name+"-max-runs/s")
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average: %s", strings.TrimSpace(string(load)))
	}
	b.ReportMetric(0, "ns/op")
}
