package workers

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard/switchboard/jobs"
)

// TestRunMetrics: a run worker records each webhook call by status class, each
// attempt's duration by outcome, and each run's queue wait by trigger.
func TestRunMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, setupOpts{allowPrivate: true, metrics: jobs.NewMetrics(reg)})
	hook := newHookServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	flaky := b.task(t, webhook(hook.URL))
	if run := b.waitRun(t, b.trigger(t, flaky.ID).ID, 15*time.Second); run.Status != jobs.StatusSucceeded {
		t.Fatalf("flaky run ended %s", run.Status)
	}
	published := b.task(t, jobs.Action{Type: jobs.ActionPublish, Event: "tick"})
	b.waitRun(t, b.trigger(t, published.ID).ID, 15*time.Second)

	want := map[string]uint64{
		`switchboard_webhook_duration_seconds{class="5xx"}`:                      1,
		`switchboard_webhook_duration_seconds{class="2xx"}`:                      1,
		`switchboard_webhook_duration_seconds{class="error"}`:                    0,
		`switchboard_run_duration_seconds{action="webhook",outcome="retried"}`:   1,
		`switchboard_run_duration_seconds{action="webhook",outcome="succeeded"}`: 1,
		`switchboard_run_duration_seconds{action="publish",outcome="succeeded"}`: 1,
		`switchboard_run_queue_wait_seconds{trigger="manual"}`:                   2,
		`switchboard_run_queue_wait_seconds{trigger="schedule"}`:                 0,
	}
	got := histogramCounts(t, reg)
	for series, n := range want {
		if got[series] != n {
			t.Errorf("%s: %d observations, want %d", series, got[series], n)
		}
	}
}

// histogramCounts maps every histogram series of reg, written as
// name{label="value",...}, to its observation count.
func histogramCounts(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range f.GetMetric() {
			out[seriesName(f.GetName(), m.GetLabel())] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

func seriesName(name string, labels []*dto.LabelPair) string {
	s := name + "{"
	for i, l := range labels {
		if i > 0 {
			s += ","
		}
		s += l.GetName() + `="` + l.GetValue() + `"`
	}
	return s + "}"
}
