package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// benchNoopArgs is the baseline's job: River's own insert of a job that
// names a run, with no run behind it.
type benchNoopArgs struct {
	RunID string `json:"run_id"`
}

func (benchNoopArgs) Kind() string { return "bench_noop" }

// BenchmarkBatchTrigger measures enqueueing in batches of 1 000: through
// POST /v1/tasks/{id}/runs/batch on a real web replica (each item with its
// own payload and idempotency key: runs, keys, River jobs, one
// task.run.queued event per run stored through the bus), beside River's
// InsertMany of 1 000 jobs on the same database, rounds alternating, in
// the same run. It reports runs/s (jobs/s) of each, min, median and max
// over the rounds, and the load average at the end.
//
//	go test -run '^$' -bench BatchTrigger -benchtime 1x ./cmd/switchboard/
func BenchmarkBatchTrigger(b *testing.B) {
	const rounds, size = 15, 1000
	dbURL := dbtest.NewDatabaseURL(b)
	cfg := testConfig(b, dbURL)
	cfg.Roles = []string{config.RoleWeb}  // enqueue only: nothing runs the jobs
	cfg.Quotas.QueuedRuns = rounds * size // every run stays queued
	srv := startServer(b, cfg)
	token, _ := registerUser(b, srv, "bench-batch@example.com")
	taskID := createTask(b, srv.URL, token, map[string]any{
		"name": "bench", "overlap": "allow", "action": map[string]any{"type": "publish", "event": "bench"},
	})
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		b.Fatal(err)
	}
	var api, baseline []float64
	for r := range rounds {
		api = append(api, size/postBatch(b, srv.URL+"/v1/tasks/"+taskID+"/runs/batch", token, r, size).Seconds())
		baseline = append(baseline, size/riverInsertMany(b, client, size).Seconds())
	}
	reportSpread(b, "batch_api", api)
	reportSpread(b, "river_insertmany", baseline)
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average: %s", strings.TrimSpace(string(load)))
	}
	b.ReportMetric(0, "ns/op")
}

// postBatch sends one batch of size items (round r's keys) and returns how
// long the answer took.
func postBatch(b *testing.B, url, token string, r, size int) time.Duration {
	items := make([]map[string]any, size)
	for i := range items {
		items[i] = map[string]any{"idempotency_key": fmt.Sprintf("r%d-%d", r, i), "payload": map[string]any{"order": i, "round": r}}
	}
	body, _ := json.Marshal(map[string]any{"items": items})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ Created int }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK || out.Created != size {
		b.Fatalf("batch: %d, created %d, %v", res.StatusCode, out.Created, err)
	}
	return time.Since(start)
}

// riverInsertMany inserts size jobs with River's InsertMany and returns how
// long it took.
func riverInsertMany(b *testing.B, client *river.Client[pgx.Tx], size int) time.Duration {
	params := make([]river.InsertManyParams, size)
	for i := range params {
		params[i] = river.InsertManyParams{Args: benchNoopArgs{RunID: fmt.Sprint(i)}}
	}
	start := time.Now()
	if _, err := client.InsertMany(context.Background(), params); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// reportSpread reports the min, median and max of xs as name-min-runs/s etc.
func reportSpread(b *testing.B, name string, xs []float64) {
	slices.Sort(xs)
	b.ReportMetric(xs[0], name+"-min-runs/s")
	b.ReportMetric(xs[len(xs)/2], name+"-median-runs/s")
	b.ReportMetric(xs[len(xs)-1], name+"-max-runs/s")
}
