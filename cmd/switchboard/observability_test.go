package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/switchboard/switchboard/infra/dbtest"
	"github.com/switchboard/switchboard/infra/testwait"
)

// The alert rules and the dashboard the Helm chart ships.
const (
	alertRulesFile = "../../chart/files/alerts/switchboard.rules.yaml"
	dashboardFile  = "../../chart/files/dashboards/switchboard.json"
)

// prometheusGenerated are series Prometheus adds to every scrape itself; no server
// exposes them.
var prometheusGenerated = map[string]bool{"up": true}

var promQL = parser.NewParser(parser.Options{})

// TestMetricsNamedByDashboardAndRules: every metric an alert rule or a dashboard panel
// reads is on a real replica's /metrics once it has run a webhook and a publish task.
// The names come from parsing the queries with Prometheus's PromQL parser.
func TestMetricsNamedByDashboardAndRules(t *testing.T) {
	t.Parallel()
	wanted := map[string][]string{} // metric → where it is read
	for where, q := range ruleQueries(t) {
		addMetrics(t, wanted, where, q)
	}
	for where, q := range dashboardQueries(t) {
		addMetrics(t, wanted, where, q)
	}
	if len(wanted) < 20 || wanted["switchboard_build_info"] == nil || wanted["switchboard_webhook_duration_seconds_bucket"] == nil {
		t.Fatalf("only %d metrics found in the rules and the dashboard: %v", len(wanted), slices.Sorted(mapKeysOf(wanted)))
	}

	exposed := scrapeAfterRuns(t)
	for _, name := range slices.Sorted(mapKeysOf(wanted)) {
		if !exposed[name] && !prometheusGenerated[name] {
			t.Errorf("%s is read by %s but not exposed on /metrics", name, strings.Join(wanted[name], "; "))
		}
	}
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

// ruleQueries are the expressions of the chart's alert rules, named by alert.
func ruleQueries(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(alertRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert+r.Record] = r.Expr
		}
	}
	return out
}

// dashboardQueries are the panels' queries and the variables' label_values queries, with
// Grafana's variables replaced so that they parse as PromQL.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", "ns", "$job", ".+")
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out["panel "+p.Title+" #"+string(rune('A'+i))] = vars.Replace(tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		// label_values(<selector>, label): the selector is what Grafana queries.
		if sel, ok := strings.CutPrefix(v.Definition, "label_values("); ok {
			out["variable "+v.Name] = vars.Replace(sel[:strings.LastIndex(sel, ",")])
		}
	}
	return out
}

// addMetrics parses q and records every metric name its vector selectors read.
func addMetrics(t *testing.T, wanted map[string][]string, where, q string) {
	t.Helper()
	expr, err := promQL.ParseExpr(q)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, q, err)
	}
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("%s: %s selects no metric by name", where, vs)
			}
			wanted[vs.Name] = append(wanted[vs.Name], where)
		}
		return nil
	})
}

func mapKeysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
