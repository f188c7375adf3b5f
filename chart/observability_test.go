package chart_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// wantAlerts are the alerts the chart ships, each with a section in docs/runbooks.md.
var wantAlerts = []string{
	"SwitchboardBacklogGrowing", "SwitchboardDueTaskLate", "SwitchboardListenReconnecting", "SwitchboardNotReady",
	"SwitchboardNotifyQueueFilling", "SwitchboardRateLimitFallback", "SwitchboardReplicaDown", "SwitchboardRunFailureRate",
}

const defaultRunbooks = "https://github.com/switchboard/switchboard/blob/main/docs/runbooks.md"

var promQL = parser.NewParser(parser.Options{})

// renderedRules renders the PrometheusRule (validated against its CRD by render) and
// checks its groups as `promtool check rules` does, with Prometheus's own rule parser.
func renderedRules(t *testing.T, overlays ...string) *rulefmt.RuleGroups {
	t.Helper()
	r := render(t, append([]string{withDB}, overlays...)...)
	pr := getCustom(t, r, "PrometheusRule", fullname)
	spec, err := yaml.Marshal(pr.raw["spec"])
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promQL, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("the rendered rules do not pass Prometheus's rule checks: %v\n%s", errs, spec)
	}
	return groups
}

func alerts(g *rulefmt.RuleGroups) map[string]rulefmt.Rule {
	out := map[string]rulefmt.Rule{}
	for _, grp := range g.Groups {
		for _, r := range grp.Rules {
			out[r.Alert] = r
		}
	}
	return out
}

func TestPrometheusRule(t *testing.T) {
	t.Parallel()

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		if _, ok := findCustom(render(t, withDB), "PrometheusRule", fullname); ok {
			t.Error("a PrometheusRule is rendered by default")
		}
	})
	t.Run("every alert checked, scoped to the release, with its runbook", func(t *testing.T) {
		t.Parallel()
		got := alerts(renderedRules(t, `prometheusRule: {enabled: true}`))
		if names := slices.Sorted(mapKeys(anyMap(got))); !slices.Equal(names, wantAlerts) {
			t.Fatalf("alerts %v, want %v", names, wantAlerts)
		}
		runbooks, err := os.ReadFile("../docs/runbooks.md")
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range got {
			if r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical" {
				t.Errorf("%s: severity %q", name, r.Labels["severity"])
			}
			if want := defaultRunbooks + "#" + strings.ToLower(name); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", name, r.Annotations["runbook_url"], want)
			}
			if !regexp.MustCompile(`(?m)^## ` + name + `$`).Match(runbooks) {
				t.Errorf("%s: no section '## %s' in docs/runbooks.md", name, name)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: summary or description missing", name)
			}
			checkScoped(t, name, r.Expr)
		}
	})
	t.Run("labels, disabled alerts, runbook base and jobs from values", func(t *testing.T) {
		t.Parallel()
		got := alerts(renderedRules(t, `prometheusRule: {enabled: true, alertLabels: {team: jobs}, disabled: [SwitchboardListenReconnecting],
  runbookBaseURL: "https://wiki.example.com/switchboard", jobs: "sb-.*"}`))
		if _, ok := got["SwitchboardListenReconnecting"]; ok || len(got) != len(wantAlerts)-1 {
			t.Errorf("disabled alert still rendered (%d alerts)", len(got))
		}
		for name, r := range got {
			if r.Labels["team"] != "jobs" || r.Labels["severity"] == "" {
				t.Errorf("%s: labels %v, want team=jobs beside its severity", name, r.Labels)
			}
			if !strings.HasPrefix(r.Annotations["runbook_url"], "https://wiki.example.com/switchboard#") {
				t.Errorf("%s: runbook_url %q", name, r.Annotations["runbook_url"])
			}
			if !strings.Contains(r.Expr, `job=~"sb-.*"`) {
				t.Errorf("%s: expr does not use the jobs from values: %s", name, r.Expr)
			}
		}
	})
	t.Run("a misspelled alert name is refused", func(t *testing.T) {
		t.Parallel()
		if _, err := tryRender(withDB, `prometheusRule: {enabled: true, disabled: [SwitchboardReplicasDown]}`); err == nil {
			t.Error("disabled accepted an alert the chart does not have")
		}
	})
}

// checkScoped: every series the expression reads is the release's own: its namespace,
// its ServiceMonitor's jobs.
func checkScoped(t *testing.T, name, expr string) {
	t.Helper()
	e, err := promQL.ParseExpr(expr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		var ns, job bool
		for _, m := range vs.LabelMatchers {
			ns = ns || m.Name == "namespace" && m.Type == labels.MatchEqual && m.Value == namespace
			job = job || m.Name == "job" && m.Type == labels.MatchRegexp && m.Value == fullname+"|"+fullname+"-worker"
		}
		if !ns || !job {
			t.Errorf("%s: %s is not scoped to namespace %s and the release's jobs", name, vs, namespace)
		}
		return nil
	})
}

func anyMap[V any](m map[string]V) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// dashboard is the part of Grafana's dashboard model the test reads.
type dashboard struct {
	UID        string           `json:"uid"`
	Title      string           `json:"title"`
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// grafanaVars stand in for the dashboard's variables so that its queries parse as PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$namespace", "apps", "$job", ".+")

func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("files/dashboards/switchboard.json")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("shipped as a ConfigMap the sidecar loads", func(t *testing.T) {
		t.Parallel()
		if cms := all[*corev1.ConfigMap](render(t, withDB)); len(cms) != 0 {
			t.Errorf("%d ConfigMaps rendered by default", len(cms))
		}
		r := render(t, withDB, `grafanaDashboard: {enabled: true, annotations: {grafana_folder: Switchboard}, namespace: monitoring}`)
		cm := get[*corev1.ConfigMap](t, r, fullname+"-dashboard")
		if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Switchboard" || cm.Namespace != "monitoring" {
			t.Errorf("ConfigMap metadata %s", yamlOf(cm.ObjectMeta))
		}
		if cm.Data["switchboard.json"] != strings.TrimRight(string(raw), "\n") {
			t.Error("the ConfigMap does not carry files/dashboards/switchboard.json as it is")
		}
	})
	t.Run("panels and queries", func(t *testing.T) {
		t.Parallel()
		var d dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		if d.UID == "" || d.Title == "" {
			t.Errorf("uid %q title %q", d.UID, d.Title)
		}
		var vars []string
		for _, v := range d.Templating.List {
			vars = append(vars, v.Name)
		}
		if !slices.Equal(vars, []string{"datasource", "namespace", "job"}) {
			t.Errorf("variables %v, want datasource, namespace, job", vars)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			checkPanel(t, p, ids)
		}
	})
}

func checkPanel(t *testing.T, p dashboardPanel, ids map[int]bool) {
	t.Helper()
	if ids[p.ID] {
		t.Errorf("panel id %d used twice", p.ID)
	}
	ids[p.ID] = true
	if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
		t.Errorf("%q: gridPos %+v outside the 24-column grid", p.Title, g)
	}
	if p.Type == "row" {
		return
	}
	if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
		t.Errorf("%q: datasource %v with %d targets, want ${datasource} and a query", p.Title, p.Datasource, len(p.Targets))
	}
	for _, tg := range p.Targets {
		if _, err := promQL.ParseExpr(grafanaVars.Replace(tg.Expr)); err != nil {
			t.Errorf("%q: %q does not parse: %v", p.Title, tg.Expr, err)
		}
		if !strings.Contains(tg.Expr, `namespace="$namespace", job=~"$job"`) {
			t.Errorf("%q: %q ignores the namespace and job variables", p.Title, tg.Expr)
		}
	}
}
