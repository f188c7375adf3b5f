package chart_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	cnpgCluster = fullname + "-db"
	cnpgPooler  = cnpgCluster + "-pooler"
	cnpgSecret  = cnpgCluster + "-app"
)

// dig walks raw through map keys and list indexes; nil when a step is missing.
func dig(raw any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := raw.(map[string]any)
			if !ok {
				return nil
			}
			raw = m[k]
		case int:
			l, ok := raw.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			raw = l[k]
		}
	}
	return raw
}

// str is dig as a string ("" when missing); numbers as YAML wrote them.
func str(raw any, path ...any) string {
	switch v := dig(raw, path...).(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// backlogQuery is the scaler's query as the service defines it: jobs/backlog.sql, whose
// copy the chart carries in files/ (jobs' tests fail when the copy drifts), wrapped to
// return demand alone as jobs.ScalerQuery does.
func backlogQuery(t *testing.T) string {
	t.Helper()
	service, err := os.ReadFile("../jobs/backlog.sql")
	if err != nil {
		t.Fatal(err)
	}
	chartCopy, err := os.ReadFile("files/backlog.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(service) != string(chartCopy) {
		t.Fatal("chart/files/backlog.sql differs from jobs/backlog.sql: copy the service's query over it")
	}
	return "SELECT demand FROM (\n" + string(service) + ") AS backlog"
}

func TestKEDA(t *testing.T) {
	t.Parallel()
	scaledObject := func(t *testing.T, r rendered) customObject {
		t.Helper()
		return getCustom(t, r, "ScaledObject", fullname+"-worker")
	}

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		if r := render(t, withDB); len(r.custom) != 0 {
			t.Errorf("%d operator objects rendered by default", len(r.custom))
		}
	})
	t.Run("PostgreSQL trigger on the service's backlog query", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `worker: {keda: {enabled: true}}`, `web: {autoscaling: {enabled: true}}`)
		so := scaledObject(t, r)
		worker := get[*appsv1.Deployment](t, r, fullname+"-worker")
		if str(so.raw, "spec", "scaleTargetRef", "name") != worker.Name || str(so.raw, "spec", "scaleTargetRef", "kind") != "Deployment" {
			t.Errorf("scaleTargetRef = %s, want the worker Deployment", yamlOf(dig(so.raw, "spec", "scaleTargetRef")))
		}
		if worker.Spec.Replicas != nil {
			t.Errorf("worker replicas = %d under KEDA; the Deployment must leave them to KEDA's HPA", *worker.Spec.Replicas)
		}
		// Wakes from zero on any work, back to zero only after 5 minutes of none.
		for path, want := range map[string]string{
			"idleReplicaCount": "0", "minReplicaCount": "1", "maxReplicaCount": "10",
			"cooldownPeriod": "300", "pollingInterval": "15",
		} {
			if got := str(so.raw, "spec", path); got != want {
				t.Errorf("spec.%s = %q, want %q", path, got, want)
			}
		}
		trig := dig(so.raw, "spec", "triggers", 0)
		if str(trig, "type") != "postgresql" || len(dig(so.raw, "spec", "triggers").([]any)) != 1 {
			t.Fatalf("triggers = %s, want one postgresql trigger", yamlOf(dig(so.raw, "spec", "triggers")))
		}
		if got := str(trig, "metadata", "query"); got != backlogQuery(t) {
			t.Errorf("trigger query =\n%s\nwant jobs.ScalerQuery:\n%s", got, backlogQuery(t))
		}
		if str(trig, "metadata", "targetQueryValue") != "20" || str(trig, "metadata", "activationTargetQueryValue") != "0" {
			t.Errorf("trigger targets = %s", yamlOf(dig(trig, "metadata")))
		}
		// KEDA reads DATABASE_URL from the same Secret and key the pods use.
		auth := getCustom(t, r, "TriggerAuthentication", str(trig, "authenticationRef", "name"))
		ref := dig(auth.raw, "spec", "secretTargetRef", 0)
		if str(ref, "parameter") != "connection" || str(ref, "name") != fullname || str(ref, "key") != "DATABASE_URL" {
			t.Errorf("secretTargetRef = %s, want connection from %s/DATABASE_URL", yamlOf(ref), fullname)
		}
		if s := get[*corev1.Secret](t, r, fullname); string(s.Data["DATABASE_URL"]) != databaseURL {
			t.Errorf("Secret %s DATABASE_URL = %q", fullname, s.Data["DATABASE_URL"])
		}
		// Its own HPA, not the chart's; the web pool keeps its HPA.
		if _, ok := find[*autoscalingv2.HorizontalPodAutoscaler](r, fullname+"-worker"); ok {
			t.Error("a chart HPA for the worker pool rendered next to KEDA's")
		}
		get[*autoscalingv2.HorizontalPodAutoscaler](t, r, fullname+"-web")
		if got := str(so.raw, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleDown", "policies", 0, "value"); got != "1" {
			t.Errorf("scale-down policy value = %q, want one pod at a time (each drains)", got)
		}
	})
	t.Run("existing Secret", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "existing-secret")[0], `worker: {keda: {enabled: true}}`)
		ref := dig(getCustom(t, r, "TriggerAuthentication", fullname+"-worker").raw, "spec", "secretTargetRef", 0)
		if str(ref, "name") != "switchboard-credentials" || str(ref, "key") != "url" {
			t.Errorf("secretTargetRef = %s, want switchboard-credentials/url", yamlOf(ref))
		}
	})
	t.Run("Prometheus trigger on the metric every node exports", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "keda-prometheus")...)
		so := scaledObject(t, r)
		trig := dig(so.raw, "spec", "triggers", 0)
		want := `max(switchboard_backlog_demand{namespace="` + namespace + `",service="` + fullname + `"})`
		if str(trig, "type") != "prometheus" || str(trig, "metadata", "query") != want ||
			str(trig, "metadata", "serverAddress") != "http://prometheus-operated.monitoring.svc:9090" ||
			str(trig, "metadata", "threshold") != "20" || str(trig, "metadata", "activationThreshold") != "0" {
			t.Errorf("trigger = %s, want prometheus on %s", yamlOf(trig), want)
		}
		if _, ok := findCustom(r, "TriggerAuthentication", fullname+"-worker"); ok {
			t.Error("a TriggerAuthentication rendered for the Prometheus trigger")
		}
		if dig(so.raw, "spec", "idleReplicaCount") != nil || str(so.raw, "spec", "minReplicaCount") != "2" {
			t.Errorf("idleReplicaCount null and minReplicaCount 2 rendered as %s", yamlOf(so.raw["spec"]))
		}
		// The service exports the metric the query names, and the web Service is scraped.
		src, err := os.ReadFile("../jobs/backlog.go")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), `"switchboard_backlog_demand"`) {
			t.Error("jobs/backlog.go exports no switchboard_backlog_demand")
		}
		if len(r.monitors) != 1 || get[*corev1.Service](t, r, fullname).Name != fullname {
			t.Error("no ServiceMonitor scraping the web Service")
		}
	})
	t.Run("rejects", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ name, values, wantErr string }{
			{"next to the worker HPA", `worker: {autoscaling: {enabled: true}, keda: {enabled: true}}`, "enable one of them"},
			{"without a worker pool", `worker: {enabled: false, keda: {enabled: true}}`, "worker.enabled=false"},
			{"idle not below min", `worker: {keda: {enabled: true, minReplicaCount: 0}}`, "must be below"},
			{"min above max", `worker: {keda: {enabled: true, minReplicaCount: 5, maxReplicaCount: 3}}`, "must not exceed"},
			{"idle other than 0", `worker: {keda: {enabled: true, idleReplicaCount: 1, minReplicaCount: 2}}`, "idleReplicaCount"},
			{"unknown trigger", `worker: {keda: {enabled: true, trigger: cpu}}`, "trigger"},
			{"Prometheus without an address", `worker: {keda: {enabled: true, trigger: prometheus}}`, "serverAddress is required"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				if _, err := tryRender(withDB, tc.values); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
				}
			})
		}
	})
}

func TestCloudNativePG(t *testing.T) {
	t.Parallel()
	r := render(t, scenarioValues(t, "cnpg")...)

	t.Run("a three-instance Cluster on distinct nodes", func(t *testing.T) {
		t.Parallel()
		c := getCustom(t, r, "Cluster", cnpgCluster)
		for path, want := range map[string]string{
			"instances": "3", "bootstrap.initdb.database": "switchboard", "bootstrap.initdb.owner": "switchboard",
			"affinity.enablePodAntiAffinity": "true", "affinity.topologyKey": hostnameKey,
			"affinity.podAntiAffinityType": "required", "storage.size": "10Gi", "enableSuperuserAccess": "false",
		} {
			steps := []any{"spec"}
			for _, s := range strings.Split(path, ".") {
				steps = append(steps, s)
			}
			if got := str(c.raw, steps...); got != want {
				t.Errorf("Cluster spec.%s = %q, want %q", path, got, want)
			}
		}
	})
	t.Run("a transaction-mode Pooler in front of the primary", func(t *testing.T) {
		t.Parallel()
		p := getCustom(t, r, "Pooler", cnpgPooler)
		if str(p.raw, "spec", "cluster", "name") != cnpgCluster || str(p.raw, "spec", "type") != "rw" ||
			str(p.raw, "spec", "pgbouncer", "poolMode") != "transaction" || str(p.raw, "spec", "instances") != "2" {
			t.Errorf("Pooler spec = %s", yamlOf(p.raw["spec"]))
		}
	})
	t.Run("pods: DATABASE_URL through the Pooler, LISTEN on the primary", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{fullname + "-web", fullname + "-worker"} {
			c := container(t, get[*appsv1.Deployment](t, r, name).Spec.Template.Spec, "switchboard")
			assertSecretRef(t, c, "CNPG_APP_PASSWORD", cnpgSecret, "password")
			assertEnvValue(t, c, "DATABASE_URL",
				"postgresql://switchboard:$(CNPG_APP_PASSWORD)@"+cnpgPooler+"."+namespace+":5432/switchboard?sslmode=require")
			if envIndex(c, "CNPG_APP_PASSWORD") > envIndex(c, "DATABASE_URL") {
				t.Errorf("%s: DATABASE_URL comes before CNPG_APP_PASSWORD: $(CNPG_APP_PASSWORD) would not expand", name)
			}
			assertEnvValue(t, c, "SWITCHBOARD_DATABASE_POOLING", "transaction")
			// CloudNativePG's uri names the -rw Service: a direct session for LISTEN.
			assertSecretRef(t, c, "SWITCHBOARD_LISTEN_DATABASE_URL", cnpgSecret, "uri")
			assertSecretRef(t, c, "SWITCHBOARD_JWT_SECRET", fullname, "SWITCHBOARD_JWT_SECRET")
			assertSecretRef(t, c, "SWITCHBOARD_CLUSTER_SECRET", fullname, "SWITCHBOARD_CLUSTER_SECRET")
		}
		if s := get[*corev1.Secret](t, r, fullname); s.Data["DATABASE_URL"] != nil {
			t.Errorf("the chart's Secret carries a DATABASE_URL (%q) next to CloudNativePG's", s.Data["DATABASE_URL"])
		}
	})
	t.Run("migrations: direct to the primary, after the Cluster is created", func(t *testing.T) {
		t.Parallel()
		job := get[*batchv1.Job](t, r, fullname+"-migrate")
		c := container(t, job.Spec.Template.Spec, "migrate")
		// goose holds a session advisory lock: not through a transaction pooler.
		assertSecretRef(t, c, "DATABASE_URL", cnpgSecret, "uri")
		if findEnv(c, "CNPG_APP_PASSWORD") != nil {
			t.Error("the migration Job builds a Pooler URL")
		}
		if got := hookEvents(job.ObjectMeta); !slices.Equal(got, []string{"post-install", "pre-upgrade"}) {
			t.Errorf("hook = %v, want post-install,pre-upgrade: at pre-install the Cluster does not exist yet", got)
		}
		for _, s := range all[*corev1.Secret](r) {
			if isHook(s.ObjectMeta) && !slices.Equal(hookEvents(s.ObjectMeta), hookEvents(job.ObjectMeta)) {
				t.Errorf("hook Secret %s runs at %v, the Job at %v", s.Name, hookEvents(s.ObjectMeta), hookEvents(job.ObjectMeta))
			}
		}
	})
	t.Run("KEDA connects to the primary", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "cnpg")[0], `worker: {keda: {enabled: true}}`)
		ref := dig(getCustom(t, r, "TriggerAuthentication", fullname+"-worker").raw, "spec", "secretTargetRef", 0)
		if str(ref, "name") != cnpgSecret || str(ref, "key") != "uri" {
			t.Errorf("secretTargetRef = %s, want %s/uri", yamlOf(ref), cnpgSecret)
		}
	})
	t.Run("values reach the objects", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "cnpg-keda-everything")...)
		c := getCustom(t, r, "Cluster", "sbdb")
		p := getCustom(t, r, "Pooler", "sbdb-pooler")
		for got, want := range map[string]string{
			str(c.raw, "spec", "instances"):                                                         "5",
			str(c.raw, "spec", "imageName"):                                                         "ghcr.io/cloudnative-pg/postgresql:17.6",
			str(c.raw, "spec", "storage", "storageClass"):                                           "fast",
			str(c.raw, "spec", "postgresql", "parameters", "max_connections"):                       "300",
			str(c.raw, "spec", "affinity", "podAntiAffinityType"):                                   "preferred",
			str(c.raw, "spec", "monitoring", "enablePodMonitor"):                                    "true",
			str(c.raw, "spec", "resources", "requests", "memory"):                                   "2Gi",
			str(p.raw, "spec", "instances"):                                                         "3",
			str(p.raw, "spec", "pgbouncer", "parameters", "default_pool_size"):                      "50",
			str(p.raw, "spec", "template", "spec", "containers", 0, "resources", "requests", "cpu"): "100m",
		} {
			if got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		}
		web := container(t, get[*appsv1.Deployment](t, r, fullname+"-web").Spec.Template.Spec, "switchboard")
		assertSecretRef(t, web, "SWITCHBOARD_LISTEN_DATABASE_URL", "sbdb-app", "uri")
		assertSecretRef(t, web, "SWITCHBOARD_JWT_SECRET", "switchboard-credentials", "jwt")
		if e := findEnv(web, "DATABASE_URL"); e == nil || !strings.Contains(e.Value, "@sbdb-pooler."+namespace+":5432/") {
			t.Errorf("DATABASE_URL = %s", yamlOf(e))
		}
	})
	t.Run("a long release name still fits CloudNativePG's 50 characters", func(t *testing.T) {
		t.Parallel()
		r := render(t, `cnpg: {enabled: true}`, `fullnameOverride: `+strings.Repeat("a", 60))
		for _, o := range r.custom {
			if o.Kind == "Cluster" && len(o.Name) > 50 {
				t.Errorf("Cluster name %q is %d characters", o.Name, len(o.Name))
			}
		}
	})
	t.Run("rejects", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ name, values, wantErr string }{
			{"cluster name too long", `cnpg: {enabled: true, clusterName: ` + strings.Repeat("d", 51) + `}`, "clusterName"},
			{"pool mode is not a parameter", `cnpg: {enabled: true, pooler: {parameters: {pool_mode: session}}}`, "parameters"},
			{"anti-affinity type", `cnpg: {enabled: true, podAntiAffinityType: sometimes}`, "podAntiAffinityType"},
			{"a database URL as well", withDB + "\n" + `cnpg: {enabled: true}`, "not used with cnpg.enabled"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				if _, err := tryRender(tc.values); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
				}
			})
		}
	})
	t.Run("without it the pods use the chart's DATABASE_URL", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB)
		web := container(t, get[*appsv1.Deployment](t, r, fullname+"-web").Spec.Template.Spec, "switchboard")
		assertSecretRef(t, web, "DATABASE_URL", fullname, "DATABASE_URL")
		for _, e := range []string{"SWITCHBOARD_LISTEN_DATABASE_URL", "SWITCHBOARD_DATABASE_POOLING", "CNPG_APP_PASSWORD"} {
			if findEnv(web, e) != nil {
				t.Errorf("%s set without cnpg", e)
			}
		}
	})
}
