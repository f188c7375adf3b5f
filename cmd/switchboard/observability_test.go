package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// metricsUsedFile lists the metrics the Helm chart's alert rules and dashboard read,
// found by parsing their PromQL in the chart's module (chart/metrics_used_test.go keeps
// it current).
const metricsUsedFile = "../../chart/files/metrics-used.txt"

// TestMetricsNamedByDashboardAndRules: every metric an alert rule or a dashboard panel
// reads is on a real replica's /metrics once it has run a webhook and a publish task.
func TestMetricsNamedByDashboardAndRules(t *testing.T) {
	t.Parallel()
	used := metricsUsed(t)
	exposed := scrapeAfterRuns(t)
	for _, m := range used {
		if !exposed[m.name] {
			t.Errorf("%s is read by %s but not exposed on /metrics", m.name, m.where)
		}
	}
}

// usedMetric is a line of metricsUsedFile.
type usedMetric struct{ name, where string }

// metricsUsed reads metricsUsedFile.
func metricsUsed(t *testing.T) []usedMetric {
	t.Helper()
	raw, err := os.ReadFile(metricsUsedFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []usedMetric
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, where, ok := strings.Cut(line, "\t")
		if !ok || !model.LegacyValidation.IsValidMetricName(name) {
			t.Fatalf("%s: malformed line %q", metricsUsedFile, line)
		}
		out = append(out, usedMetric{name, where})
	}
	if len(out) < 20 {
		t.Fatalf("%s names only %d metrics", metricsUsedFile, len(out))
	}
	return out
}

// scrapeAfterRuns starts a replica with both roles, runs a webhook and a publish task
// to success, and returns the series names its /metrics exposes (a histogram family as
// its _bucket, _sum and _count series).
func scrapeAfterRuns(t *testing.T) map[string]bool {
	t.Helper()
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer hook.Close()
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.WebhookPrivate = true
	srv := startServer(t, cfg)
	token, _ := registerUser(t, srv, "metrics@example.com")
	for _, action := range []map[string]any{
		{"type": "webhook", "url": hook.URL},
		{"type": "publish", "event": "metrics.check"},
	} {
		status, task := call(t, http.MethodPost, srv.URL+"/v1/tasks", map[string]any{"name": "on demand", "action": action}, token)
		if status != http.StatusCreated {
			t.Fatalf("create task: %d %v", status, task)
		}
		status, run := call(t, http.MethodPost, srv.URL+"/v1/tasks/"+task["id"].(string)+"/runs", nil, token)
		if status != http.StatusAccepted {
			t.Fatalf("trigger: %d %v", status, run)
		}
		testwait.For(t, 20*time.Second, "the run to succeed", func() bool {
			_, r := call(t, http.MethodGet, srv.URL+"/v1/runs/"+run["id"].(string), nil, token)
			return r["status"] == "succeeded"
		})
	}
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			exposed[name+"_bucket"], exposed[name+"_sum"], exposed[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			exposed[name], exposed[name+"_sum"], exposed[name+"_count"] = true, true, true
		default:
			exposed[name] = true
		}
	}
	return exposed
}
