// Package chart_test renders the Switchboard Helm chart with Helm's own engine, decodes
// every manifest strictly against client-go's scheme, and asserts the properties the
// deployment relies on. It also checks fly.toml and the Dockerfile against the same facts.
package chart_test

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Facts about the service the chart deploys (shared/API.md, "Service" and "Configuration").
const (
	readyPath     = "/healthz/ready"
	livePath      = "/healthz/live"
	metricsPath   = "/metrics"
	containerPort = 8080
	hostnameKey   = "kubernetes.io/hostname"

	releaseName = "prod"
	namespace   = "apps"
	fullname    = "prod-switchboard"
	databaseURL = "postgres://switchboard:pw@db.internal:5432/switchboard?sslmode=require"
)

// withDB is the one value a plain install must be given.
const withDB = `secret: {databaseURL: "` + databaseURL + `"}`

// loadChart reads the chart directory once; .helmignore keeps this Go module out of it.
var loadChart = sync.OnceValues(func() (*chart.Chart, error) { return loader.LoadDir(".") })

// strictYAML decodes YAML into client-go's typed objects, failing on unknown kinds,
// unknown or duplicate fields.
var strictYAML = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// rendered is one `helm install` worth of manifests, decoded.
type rendered struct {
	objects  []runtime.Object // every kind client-go knows
	monitors []serviceMonitor // monitoring.coreos.com/v1, not in client-go's scheme
	custom   []customObject   // KEDA and CloudNativePG kinds, validated against testdata/crds
	notes    string
}

// serviceMonitor is the subset of the Prometheus Operator's ServiceMonitor the chart
// renders; decoded strictly, so a field the chart adds must be added here too.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// render renders the chart as `helm install prod -n apps -f overlay...` would, and fails
// the test on any render or decode error.
func render(t *testing.T, overlays ...string) rendered {
	t.Helper()
	r, err := tryRender(overlays...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tryRender(overlays ...string) (rendered, error) {
	ch, err := loadChart()
	if err != nil {
		return rendered{}, fmt.Errorf("load chart: %w", err)
	}
	vals := map[string]any{}
	for _, o := range overlays {
		v, err := chartutil.ReadValues([]byte(o))
		if err != nil {
			return rendered{}, fmt.Errorf("read values %q: %w", o, err)
		}
		mergeValues(vals, v)
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return rendered{}, fmt.Errorf("values: %w", err)
	}
	// Strict: a template reading a value that values.yaml does not define is an error.
	files, err := engine.Engine{Strict: true}.Render(ch, top)
	if err != nil {
		return rendered{}, fmt.Errorf("render: %w", err)
	}
	return decodeAll(files)
}

// mergeValues deep-merges src into dst, like repeated `-f` flags.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeValues(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func decodeAll(files map[string]string) (rendered, error) {
	var r rendered
	for _, name := range slices.Sorted(maps.Keys(files)) {
		base := path.Base(name)
		switch {
		case base == "NOTES.txt":
			r.notes = files[name]
			continue
		case strings.HasPrefix(base, "_"):
			continue
		}
		for i, doc := range docSeparator.Split(files[name], -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			if err := r.decode([]byte(doc)); err != nil {
				return r, fmt.Errorf("%s, document %d: %w\n%s", name, i, err, doc)
			}
		}
	}
	return r, r.checkUnique()
}

func (r *rendered) decode(doc []byte) error {
	var head metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	if head.Kind == "" {
		return fmt.Errorf("document without a kind")
	}
	if head.APIVersion == "monitoring.coreos.com/v1" && head.Kind == "ServiceMonitor" {
		var sm serviceMonitor
		if err := yaml.UnmarshalStrict(doc, &sm); err != nil {
			return err
		}
		r.monitors = append(r.monitors, sm)
		return nil
	}
	if customKinds[head.APIVersion+" "+head.Kind] {
		o, err := decodeCustom(doc, head)
		if err != nil {
			return err
		}
		if err := validateCustom(o); err != nil {
			return err
		}
		r.custom = append(r.custom, o)
		return nil
	}
	obj, _, err := strictYAML.Decode(doc, nil, nil)
	if err != nil {
		return err
	}
	r.objects = append(r.objects, obj)
	return nil
}

func (r *rendered) checkUnique() error {
	seen := map[string]bool{}
	for _, o := range r.objects {
		id := kindName(o)
		if seen[id] {
			return fmt.Errorf("%s rendered twice", id)
		}
		seen[id] = true
	}
	for _, o := range r.custom {
		id := o.Kind + "/" + o.Name
		if seen[id] {
			return fmt.Errorf("%s rendered twice", id)
		}
		seen[id] = true
	}
	return nil
}

func kindName(o runtime.Object) string {
	return fmt.Sprintf("%T/%s", o, objectMeta(o).GetName())
}

func objectMeta(o runtime.Object) metav1.Object {
	m, err := meta.Accessor(o)
	if err != nil {
		panic(err) // every kind in client-go's scheme has metadata
	}
	return m
}

func (r rendered) names() []string {
	var out []string
	for _, o := range r.objects {
		out = append(out, kindName(o))
	}
	return out
}

// find returns the object of type T with that name, if rendered.
func find[T runtime.Object](r rendered, name string) (T, bool) {
	for _, o := range r.objects {
		if typed, ok := o.(T); ok && objectMeta(o).GetName() == name {
			return typed, true
		}
	}
	var zero T
	return zero, false
}

// get is find that fails the test when the object is missing.
func get[T runtime.Object](t *testing.T, r rendered, name string) T {
	t.Helper()
	o, ok := find[T](r, name)
	if !ok {
		t.Fatalf("no %T named %q; rendered: %v", o, name, r.names())
	}
	return o
}

// all returns every rendered object of type T.
func all[T runtime.Object](r rendered) []T {
	var out []T
	for _, o := range r.objects {
		if typed, ok := o.(T); ok {
			out = append(out, typed)
		}
	}
	return out
}

func TestChartExcludesGoModule(t *testing.T) {
	t.Parallel()
	ch, err := loadChart()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ch.Files {
		if strings.HasSuffix(f.Name, ".go") || f.Name == "go.mod" || f.Name == "go.sum" || f.Name == "ci.sh" {
			t.Errorf("%s would be packaged into the chart; list it in .helmignore", f.Name)
		}
	}
	if ch.Metadata.Name != "switchboard" || ch.Metadata.APIVersion != chart.APIVersionV2 {
		t.Errorf("chart metadata = %s %s, want switchboard v2", ch.Metadata.Name, ch.Metadata.APIVersion)
	}
	if err := ch.Validate(); err != nil {
		t.Errorf("Chart.yaml: %v", err)
	}
}

// scenarios are the value sets every strictness check runs over.
var scenarios = []struct {
	name   string
	values []string
}{
	{"defaults", []string{withDB}},
	{"web-only", []string{withDB, `worker: {enabled: false}`}},
	{"hpa", []string{withDB, `
web: {autoscaling: {enabled: true, targetMemoryUtilizationPercentage: 80}}
worker: {autoscaling: {enabled: true, minReplicas: 1, maxReplicas: 20}, pdb: {enabled: true}}`}},
	{"existing-secret", []string{`
secret:
  existingSecret: switchboard-credentials
  keys: {databaseURL: url, jwtSecret: jwt, clusterSecret: cluster}`}},
	{"ingress", []string{withDB, `
ingress:
  enabled: true
  annotations: {cert-manager.io/cluster-issuer: letsencrypt}
  tls: [{secretName: switchboard-tls, hosts: [switchboard.example.com]}]`}},
	{"everything", []string{withDB, `
image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
imagePullSecrets: [{name: registry}]
serviceAccount: {create: false, name: switchboard}
secret: {jwtSecret: jwt-secret-from-values, clusterSecret: cluster-secret-from-values}
config:
  trustedProxies: 10.0.0.0/8
  authRate: 10
  authBurst: 20
  webhookAllowPrivate: true
  logFormat: text
extraEnv: [{name: GOMEMLIMIT, value: 400MiB}]
extraEnvFrom: [{configMapRef: {name: switchboard-extra}}]
drain: {preStopSeconds: 10, shutdownTimeoutSeconds: 40, terminationGracePeriodSeconds: 60}
web:
  podAnnotations: {example.com/team: jobs}
  podLabels: {example.com/tier: front}
  nodeSelector: {pool: general}
  tolerations: [{key: dedicated, operator: Equal, value: switchboard, effect: NoSchedule}]
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
      labelSelector: {matchLabels: {app.kubernetes.io/component: web}}
  priorityClassName: high
worker: {autoscaling: {enabled: true}, pdb: {enabled: true}}
ingress: {enabled: true}
serviceMonitor: {enabled: true, labels: {release: prometheus}}
service: {annotations: {example.com/lb: internal}}`}},
	{"migrations-off", []string{withDB, `migrations: {enabled: false}`}},
	{"service-account", []string{withDB, `serviceAccount: {name: sb, annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/sb"}}`}},
	{"network-policy", []string{withDB, `
networkPolicy:
  enabled: true
  ingress: {from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]}
  egress:
    database: {to: [{ipBlock: {cidr: 10.20.0.0/16}}], ports: [5432, 6432]}
    webhooks: {ports: [443]}
    extra: [{to: [{podSelector: {matchLabels: {app: otel-collector}}}], ports: [{port: 4318}]}]`}},
	{"network-policy-cnpg", []string{`{cnpg: {enabled: true}, networkPolicy: {enabled: true, egress: {webhooks: {enabled: false}}}}`}},
	{"keda", []string{withDB, `worker: {keda: {enabled: true}}`}},
	{"keda-prometheus", []string{withDB, `
worker: {keda: {enabled: true, trigger: prometheus, minReplicaCount: 2, idleReplicaCount: null,
  prometheus: {serverAddress: "http://prometheus-operated.monitoring.svc:9090"}}}
serviceMonitor: {enabled: true}`}},
	{"cnpg", []string{`cnpg: {enabled: true}`}},
	{"cnpg-backup", []string{`
cnpg:
  enabled: true
  backup:
    enabled: true
    objectStore: {destinationPath: "s3://backups/switchboard", secretName: backup-s3}`}},
	{"cnpg-backup-everything", []string{`
cnpg:
  enabled: true
  clusterName: sbdb
  backup:
    enabled: true
    schedule: "@every 6h"
    immediate: false
    target: primary
    retentionPolicy: 8w
    serverName: sbdb-2
    objectStore:
      destinationPath: "s3://backups/sb"
      endpointURL: "https://minio.storage.svc:9000"
      endpointCA: {secretName: minio-ca, key: root.pem}
      secretName: minio-creds
      s3: {accessKeyIdKey: user, secretAccessKeyKey: password, sessionTokenKey: token, regionKey: region}
      wal: {compression: zstd, maxParallel: 8}
      data: {compression: lz4, jobs: 4}
      encryption: AES256
      sidecarResources: {requests: {cpu: 50m, memory: 128Mi}}`}},
	{"cnpg-keda-everything", []string{`
secret:
  existingSecret: switchboard-credentials
  keys: {jwtSecret: jwt, clusterSecret: cluster}
cnpg:
  enabled: true
  clusterName: sbdb
  instances: 5
  imageName: ghcr.io/cloudnative-pg/postgresql:17.6
  storage: {size: 50Gi, storageClass: fast}
  podAntiAffinityType: preferred
  postgresql: {parameters: {max_connections: 300, shared_buffers: 1GB}}
  resources: {requests: {cpu: "1", memory: 2Gi}}
  monitoring: {enablePodMonitor: true}
  pooler:
    instances: 3
    parameters: {default_pool_size: 50, max_client_conn: 5000}
    resources: {requests: {cpu: 100m}}
worker:
  keda: {enabled: true, minReplicaCount: 2, maxReplicaCount: 40, targetDemandPerReplica: 50, activationDemand: 1,
    pollingInterval: 5, cooldownPeriod: 600, scaleDownStabilizationSeconds: 120}
  pdb: {enabled: true}`}},
}

// TestRenderStrict renders every scenario; render itself fails on unknown kinds and
// fields, duplicate keys and duplicate objects. Here: the labels every object carries.
func TestRenderStrict(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, sc.values...)
			if len(r.objects) < 4 {
				t.Fatalf("only %d objects rendered: %v", len(r.objects), r.names())
			}
			metas := []metav1.Object{}
			for _, o := range r.objects {
				metas = append(metas, objectMeta(o))
			}
			for i := range r.monitors {
				metas = append(metas, &r.monitors[i].ObjectMeta)
			}
			for i := range r.custom {
				metas = append(metas, &r.custom[i].ObjectMeta)
			}
			for _, m := range metas {
				if len(m.GetName()) > 63 {
					t.Errorf("%s: name longer than 63 characters", m.GetName())
				}
				for _, k := range []string{
					"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
					"app.kubernetes.io/managed-by", "helm.sh/chart",
				} {
					if m.GetLabels()[k] == "" {
						t.Errorf("%s: label %s missing", m.GetName(), k)
					}
				}
			}
			if !strings.Contains(r.notes, releaseName) {
				t.Errorf("NOTES.txt does not mention the release:\n%s", r.notes)
			}
		})
	}
}

// TestRenderRejects checks that bad values fail the install with a message that says
// what to fix, instead of rendering pods that cannot work.
func TestRenderRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, values, wantErr string
	}{
		{"no database URL", ``, "secret.databaseURL is required"},
		{"grace period shorter than drain", withDB + "\n" + `drain: {terminationGracePeriodSeconds: 30}`, "must exceed"},
		{"unknown top-level key", withDB + "\n" + `replicaCount: 3`, "replicaCount"},
		{"unknown pool key", withDB + "\n" + `web: {replicas: 3}`, "replicas"},
		{"roles are not a value", withDB + "\n" + `worker: {roles: web}`, "roles"},
		{"bad log format", withDB + "\n" + `config: {logFormat: yaml}`, "logFormat"},
		{"short JWT secret", withDB + "\n" + `secret: {jwtSecret: short}`, "jwtSecret"},
		{"not a postgres URL", `secret: {databaseURL: "mysql://db/switchboard"}`, "databaseURL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tryRender(tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// yamlOf is for failure messages.
func yamlOf(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(bytes.TrimSpace(b))
}
