package chart_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestDeployments checks the properties both pools rely on, with default values.
func TestDeployments(t *testing.T) {
	t.Parallel()
	r := render(t, withDB)
	for _, pool := range []struct {
		component, roles string
		replicas         int32
	}{
		{"web", "web", 2},
		{"worker", "worker", 2},
	} {
		t.Run(pool.component, func(t *testing.T) {
			t.Parallel()
			d := get[*appsv1.Deployment](t, r, fullname+"-"+pool.component)
			pod := d.Spec.Template
			c := container(t, pod.Spec, "switchboard")

			t.Run("replicas", func(t *testing.T) {
				t.Parallel()
				if d.Spec.Replicas == nil || *d.Spec.Replicas != pool.replicas {
					t.Errorf("replicas = %v, want %d", d.Spec.Replicas, pool.replicas)
				}
			})
			t.Run("selector matches only its own pods", func(t *testing.T) {
				t.Parallel()
				sel := selector(t, d.Spec.Selector)
				if !sel.Matches(labels.Set(pod.Labels)) {
					t.Errorf("selector %s does not match pod labels %v", sel, pod.Labels)
				}
				if pool.component == "web" && sel.Matches(labels.Set(workerPodLabels(t, r))) {
					t.Errorf("web selector %s also matches worker pods", sel)
				}
			})
			t.Run("anti-affinity preferred on hostname", func(t *testing.T) {
				t.Parallel()
				assertSpreadAcrossNodes(t, pod)
			})
			t.Run("probes hit the health routes", func(t *testing.T) {
				t.Parallel()
				assertProbe(t, c, "readiness", c.ReadinessProbe, readyPath)
				assertProbe(t, c, "liveness", c.LivenessProbe, livePath)
				assertProbe(t, c, "startup", c.StartupProbe, livePath)
			})
			t.Run("serves", func(t *testing.T) {
				t.Parallel()
				if !slices.Equal(c.Args, []string{"serve"}) || len(c.Command) != 0 {
					t.Errorf("command %q args %q, want the image entrypoint with args [serve]", c.Command, c.Args)
				}
				if want := "ghcr.io/switchboard/switchboard:0.1.0"; c.Image != want {
					t.Errorf("image = %q, want %q (chart appVersion)", c.Image, want)
				}
			})
			t.Run("env", func(t *testing.T) {
				t.Parallel()
				assertEnvValue(t, c, "SWITCHBOARD_ROLES", pool.roles)
				assertEnvValue(t, c, "SWITCHBOARD_HTTP_ADDR", ":8080")
				assertEnvValue(t, c, "SWITCHBOARD_LOG_FORMAT", "json")
				assertAdvertiseFromPodIP(t, c)
				for _, name := range []string{"SWITCHBOARD_TRUSTED_PROXIES", "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE"} {
					if e := findEnv(c, name); e != nil {
						t.Errorf("%s set by default: %s", name, yamlOf(e))
					}
				}
			})
			t.Run("secret refs", func(t *testing.T) {
				t.Parallel()
				assertSecretRef(t, c, "DATABASE_URL", fullname, "DATABASE_URL")
				assertSecretRef(t, c, "SWITCHBOARD_JWT_SECRET", fullname, "SWITCHBOARD_JWT_SECRET")
				assertSecretRef(t, c, "SWITCHBOARD_CLUSTER_SECRET", fullname, "SWITCHBOARD_CLUSTER_SECRET")
				if pod.Annotations["checksum/secret"] == "" {
					t.Error("no checksum/secret annotation: pods would not roll when the Secret changes")
				}
			})
			t.Run("drain outlasts preStop and shutdown", func(t *testing.T) {
				t.Parallel()
				assertDrain(t, pod.Spec, c, 5, 25*time.Second)
			})
			t.Run("rolls without losing capacity", func(t *testing.T) {
				t.Parallel()
				ru := d.Spec.Strategy.RollingUpdate
				if ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
					t.Errorf("rollingUpdate = %s, want maxUnavailable 0", yamlOf(ru))
				}
			})
			t.Run("security context", func(t *testing.T) {
				t.Parallel()
				assertLockedDown(t, pod.Spec, c)
			})
			t.Run("resources", func(t *testing.T) {
				t.Parallel()
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
					t.Errorf("resources = %s, want cpu/memory requests and a memory limit", yamlOf(c.Resources))
				}
			})
		})
	}
}

func TestWebOnly(t *testing.T) {
	t.Parallel()
	r := render(t, withDB, `worker: {enabled: false, autoscaling: {enabled: true}, pdb: {enabled: true}}`)

	t.Run("no worker objects", func(t *testing.T) {
		t.Parallel()
		for _, name := range r.names() {
			if strings.HasSuffix(name, "-worker") {
				t.Errorf("%s rendered with worker.enabled=false", name)
			}
		}
	})
	t.Run("web takes both roles", func(t *testing.T) {
		t.Parallel()
		d := get[*appsv1.Deployment](t, r, fullname+"-web")
		c := container(t, d.Spec.Template.Spec, "switchboard")
		assertEnvValue(t, c, "SWITCHBOARD_ROLES", "web,worker")
		if *d.Spec.Replicas != 2 {
			t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
		}
		assertSpreadAcrossNodes(t, d.Spec.Template)
		assertProbe(t, c, "readiness", c.ReadinessProbe, readyPath)
		assertProbe(t, c, "liveness", c.LivenessProbe, livePath)
	})
}

func TestAutoscaling(t *testing.T) {
	t.Parallel()

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		if hpas := all[*autoscalingv2.HorizontalPodAutoscaler](render(t, withDB)); len(hpas) != 0 {
			t.Errorf("%d HPAs rendered by default", len(hpas))
		}
	})
	t.Run("worker HPA", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `worker: {autoscaling: {enabled: true, minReplicas: 3, maxReplicas: 30, targetCPUUtilizationPercentage: 60}}`)
		d := get[*appsv1.Deployment](t, r, fullname+"-worker")
		if d.Spec.Replicas != nil {
			t.Errorf("worker replicas = %d with an HPA; the Deployment must leave them to it", *d.Spec.Replicas)
		}
		if web := get[*appsv1.Deployment](t, r, fullname+"-web"); web.Spec.Replicas == nil || *web.Spec.Replicas != 2 {
			t.Errorf("web replicas = %v, want 2 (its own count)", web.Spec.Replicas)
		}
		hpa := get[*autoscalingv2.HorizontalPodAutoscaler](t, r, fullname+"-worker")
		assertHPA(t, hpa, d, 3, 30, map[corev1.ResourceName]int32{corev1.ResourceCPU: 60})
		if _, ok := find[*autoscalingv2.HorizontalPodAutoscaler](r, fullname+"-web"); ok {
			t.Error("web HPA rendered though only the worker's is enabled")
		}
	})
	t.Run("web HPA with memory", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `web: {autoscaling: {enabled: true, targetMemoryUtilizationPercentage: 80}}`)
		d := get[*appsv1.Deployment](t, r, fullname+"-web")
		hpa := get[*autoscalingv2.HorizontalPodAutoscaler](t, r, fullname+"-web")
		assertHPA(t, hpa, d, 2, 10, map[corev1.ResourceName]int32{corev1.ResourceCPU: 70, corev1.ResourceMemory: 80})
	})
}

func TestPodDisruptionBudgets(t *testing.T) {
	t.Parallel()

	t.Run("web keeps one pod", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB)
		pdb := get[*policyv1.PodDisruptionBudget](t, r, fullname+"-web")
		if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) {
			t.Errorf("minAvailable = %v, want 1", pdb.Spec.MinAvailable)
		}
		sel := selector(t, pdb.Spec.Selector)
		if web := get[*appsv1.Deployment](t, r, fullname+"-web"); !sel.Matches(labels.Set(web.Spec.Template.Labels)) {
			t.Errorf("PDB selector %s does not match web pods", sel)
		}
		if sel.Matches(labels.Set(workerPodLabels(t, r))) {
			t.Errorf("PDB selector %s matches worker pods too", sel)
		}
		if _, ok := find[*policyv1.PodDisruptionBudget](r, fullname+"-worker"); ok {
			t.Error("worker PDB rendered by default")
		}
	})
	t.Run("none for a single replica", func(t *testing.T) {
		t.Parallel()
		// minAvailable 1 of 1 would block every node drain.
		r := render(t, withDB, `web: {replicaCount: 1}`)
		if pdbs := all[*policyv1.PodDisruptionBudget](r); len(pdbs) != 0 {
			t.Errorf("PDB rendered for a single web replica")
		}
		r = render(t, withDB, `web: {replicaCount: 1, autoscaling: {enabled: true, minReplicas: 2}}`)
		get[*policyv1.PodDisruptionBudget](t, r, fullname+"-web")
	})
	t.Run("worker PDB on request", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `worker: {pdb: {enabled: true, minAvailable: 50%}}`)
		pdb := get[*policyv1.PodDisruptionBudget](t, r, fullname+"-worker")
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "50%" {
			t.Errorf("minAvailable = %v, want 50%%", pdb.Spec.MinAvailable)
		}
		if !selector(t, pdb.Spec.Selector).Matches(labels.Set(workerPodLabels(t, r))) {
			t.Error("worker PDB does not select worker pods")
		}
	})
}

// TestValuesReachPods checks that optional values land where they should.
func TestValuesReachPods(t *testing.T) {
	t.Parallel()
	r := render(t, scenarioValues(t, "everything")...)
	web := get[*appsv1.Deployment](t, r, fullname+"-web")
	c := container(t, web.Spec.Template.Spec, "switchboard")

	t.Run("config env", func(t *testing.T) {
		t.Parallel()
		for name, want := range map[string]string{
			"SWITCHBOARD_TRUSTED_PROXIES":       "10.0.0.0/8",
			"SWITCHBOARD_CLIENT_IP_HEADER":      "X-Forwarded-For",
			"SWITCHBOARD_AUTH_RATE":             "10",
			"SWITCHBOARD_AUTH_BURST":            "20",
			"SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE": "true",
			"SWITCHBOARD_LOG_FORMAT":            "text",
			"SWITCHBOARD_SHUTDOWN_TIMEOUT":      "40s",
			"GOMEMLIMIT":                        "400MiB",
		} {
			assertEnvValue(t, c, name, want)
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != "switchboard-extra" {
			t.Errorf("envFrom = %s", yamlOf(c.EnvFrom))
		}
	})
	t.Run("drain values", func(t *testing.T) {
		t.Parallel()
		assertDrain(t, web.Spec.Template.Spec, c, 10, 40*time.Second)
		if got := *web.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 60 {
			t.Errorf("terminationGracePeriodSeconds = %d, want the explicit 60", got)
		}
	})
	t.Run("image digest", func(t *testing.T) {
		t.Parallel()
		if !strings.HasPrefix(c.Image, "ghcr.io/switchboard/switchboard@sha256:") {
			t.Errorf("image = %q, want it pinned by digest", c.Image)
		}
	})
	t.Run("scheduling", func(t *testing.T) {
		t.Parallel()
		spec := web.Spec.Template.Spec
		if spec.NodeSelector["pool"] != "general" || len(spec.Tolerations) != 1 || len(spec.TopologySpreadConstraints) != 1 {
			t.Errorf("scheduling values lost: %s", yamlOf(map[string]any{
				"nodeSelector": spec.NodeSelector, "tolerations": spec.Tolerations, "spread": spec.TopologySpreadConstraints,
			}))
		}
		if spec.PriorityClassName != "high" || spec.ServiceAccountName != "switchboard" || len(spec.ImagePullSecrets) != 1 {
			t.Errorf("priorityClassName %q, serviceAccountName %q, imagePullSecrets %v",
				spec.PriorityClassName, spec.ServiceAccountName, spec.ImagePullSecrets)
		}
		assertSpreadAcrossNodes(t, web.Spec.Template)
	})
	t.Run("pod metadata", func(t *testing.T) {
		t.Parallel()
		tpl := web.Spec.Template
		if tpl.Annotations["example.com/team"] != "jobs" || tpl.Labels["example.com/tier"] != "front" {
			t.Errorf("pod metadata = %s", yamlOf(tpl.ObjectMeta))
		}
	})
	t.Run("custom affinity replaces the default", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `web: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [web]}]}]}}}}`)
		spec := get[*appsv1.Deployment](t, r, fullname+"-web").Spec.Template.Spec
		if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.PodAntiAffinity != nil {
			t.Errorf("affinity = %s, want exactly the one from values", yamlOf(spec.Affinity))
		}
	})
}

func scenarioValues(t *testing.T, name string) []string {
	t.Helper()
	for _, sc := range scenarios {
		if sc.name == name {
			return sc.values
		}
	}
	t.Fatalf("no scenario %q", name)
	return nil
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in %s", name, yamlOf(spec.Containers))
	return corev1.Container{}
}

func selector(t *testing.T, ls *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Empty() {
		t.Fatal("empty selector selects everything")
	}
	return sel
}

func workerPodLabels(t *testing.T, r rendered) map[string]string {
	t.Helper()
	return get[*appsv1.Deployment](t, r, fullname+"-worker").Spec.Template.Labels
}

// assertSpreadAcrossNodes wants a *preferred* pod anti-affinity on the hostname that
// selects the pod's own component: replicas land on different nodes when they can, and
// still schedule on a single-node cluster.
func assertSpreadAcrossNodes(t *testing.T, pod corev1.PodTemplateSpec) {
	t.Helper()
	aff := pod.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil {
		t.Fatalf("no podAntiAffinity: %s", yamlOf(aff))
	}
	if req := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution; len(req) != 0 {
		t.Errorf("required anti-affinity %s: pods would not schedule with fewer nodes than replicas", yamlOf(req))
	}
	for _, term := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if term.PodAffinityTerm.TopologyKey != hostnameKey || term.Weight <= 0 {
			continue
		}
		if selector(t, term.PodAffinityTerm.LabelSelector).Matches(labels.Set(pod.Labels)) {
			return
		}
	}
	t.Errorf("no preferred anti-affinity on %s selecting the pod's own labels %v: %s",
		hostnameKey, pod.Labels, yamlOf(aff.PodAntiAffinity))
}

func assertProbe(t *testing.T, c corev1.Container, kind string, p *corev1.Probe, wantPath string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s probe = %s, want GET %s", kind, yamlOf(p), wantPath)
		return
	}
	if p.HTTPGet.Path != wantPath {
		t.Errorf("%s probe path = %q, want the service's %q", kind, p.HTTPGet.Path, wantPath)
	}
	if port := resolvePort(c, p.HTTPGet.Port); port != containerPort {
		t.Errorf("%s probe port %s resolves to %d, want %d", kind, p.HTTPGet.Port.String(), port, containerPort)
	}
	if p.TimeoutSeconds < 1 || p.PeriodSeconds < 1 || p.FailureThreshold < 1 {
		t.Errorf("%s probe timings = %s", kind, yamlOf(p))
	}
}

func resolvePort(c corev1.Container, port intstr.IntOrString) int32 {
	if port.Type == intstr.Int {
		return port.IntVal
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return p.ContainerPort
		}
	}
	return -1
}

func findEnv(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func envIndex(c corev1.Container, name string) int {
	return slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

func assertEnvValue(t *testing.T, c corev1.Container, name, want string) {
	t.Helper()
	e := findEnv(c, name)
	if e == nil || e.ValueFrom != nil || e.Value != want {
		t.Errorf("env %s = %s, want %q", name, yamlOf(e), want)
	}
}

// assertAdvertiseFromPodIP: other nodes reach this pod at <pod IP>:8080, through the
// downward API; Kubernetes expands $(POD_IP) only when POD_IP is defined earlier.
func assertAdvertiseFromPodIP(t *testing.T, c corev1.Container) {
	t.Helper()
	podIP := findEnv(c, "POD_IP")
	if podIP == nil || podIP.ValueFrom == nil || podIP.ValueFrom.FieldRef == nil || podIP.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP = %s, want fieldRef status.podIP", yamlOf(podIP))
	}
	assertEnvValue(t, c, "SWITCHBOARD_ADVERTISE_ADDR", "$(POD_IP):8080")
	if envIndex(c, "POD_IP") > envIndex(c, "SWITCHBOARD_ADVERTISE_ADDR") {
		t.Error("SWITCHBOARD_ADVERTISE_ADDR comes before POD_IP: $(POD_IP) would not expand")
	}
}

func assertSecretRef(t *testing.T, c corev1.Container, env, secret, key string) {
	t.Helper()
	e := findEnv(c, env)
	if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Errorf("env %s = %s, want a secretKeyRef", env, yamlOf(e))
		return
	}
	ref := e.ValueFrom.SecretKeyRef
	if ref.Name != secret || ref.Key != key || (ref.Optional != nil && *ref.Optional) {
		t.Errorf("env %s from %s, want required key %q of Secret %q", env, yamlOf(ref), key, secret)
	}
}

// assertDrain: the kubelet waits preStop, sends SIGTERM, then the binary drains for up
// to SWITCHBOARD_SHUTDOWN_TIMEOUT; the grace period must cover both or pods are killed
// mid-drain.
func assertDrain(t *testing.T, spec corev1.PodSpec, c corev1.Container, wantPreStop int64, wantShutdown time.Duration) {
	t.Helper()
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatalf("preStop = %s, want a sleep action (the image has no shell)", yamlOf(c.Lifecycle))
	}
	preStop := c.Lifecycle.PreStop.Sleep.Seconds
	if preStop != wantPreStop {
		t.Errorf("preStop sleep = %ds, want %ds", preStop, wantPreStop)
	}
	e := findEnv(c, "SWITCHBOARD_SHUTDOWN_TIMEOUT")
	if e == nil {
		t.Fatal("SWITCHBOARD_SHUTDOWN_TIMEOUT not set")
	}
	shutdown, err := time.ParseDuration(e.Value)
	if err != nil || shutdown != wantShutdown {
		t.Errorf("SWITCHBOARD_SHUTDOWN_TIMEOUT = %q (%v), want %s", e.Value, err, wantShutdown)
	}
	if spec.TerminationGracePeriodSeconds == nil {
		t.Fatal("terminationGracePeriodSeconds unset (default 30s)")
	}
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if drain := time.Duration(preStop)*time.Second + shutdown; grace <= drain {
		t.Errorf("terminationGracePeriodSeconds = %s, want more than preStop + shutdown = %s", grace, drain)
	}
}

func assertLockedDown(t *testing.T, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext = %s, want non-root", yamlOf(psc))
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext = %s, want read-only root, no escalation, all capabilities dropped", yamlOf(sc))
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("service account token mounted; Switchboard never calls the Kubernetes API")
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" })
	if i < 0 {
		t.Fatal("no volume at /tmp")
	}
	vol := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	if vol < 0 || spec.Volumes[vol].EmptyDir == nil {
		t.Errorf("/tmp is not an emptyDir: %s", yamlOf(spec.Volumes))
	}
}

func assertHPA(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, d *appsv1.Deployment, min, max int32, targets map[corev1.ResourceName]int32) {
	t.Helper()
	ref := hpa.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != d.Name {
		t.Errorf("scaleTargetRef = %s, want Deployment %s", yamlOf(ref), d.Name)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != min || hpa.Spec.MaxReplicas != max {
		t.Errorf("replicas %v..%d, want %d..%d", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, min, max)
	}
	got := map[corev1.ResourceName]int32{}
	for _, m := range hpa.Spec.Metrics {
		if m.Resource != nil && m.Resource.Target.AverageUtilization != nil {
			got[m.Resource.Name] = *m.Resource.Target.AverageUtilization
		}
	}
	if len(got) != len(targets) {
		t.Errorf("metrics = %v, want %v", got, targets)
	}
	for name, want := range targets {
		if got[name] != want {
			t.Errorf("%s target = %d, want %d", name, got[name], want)
		}
	}
}
