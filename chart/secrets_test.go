package chart_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	hookAnnotation   = "helm.sh/hook"
	weightAnnotation = "helm.sh/hook-weight"
	deleteAnnotation = "helm.sh/hook-delete-policy"
)

func TestSecrets(t *testing.T) {
	t.Parallel()

	t.Run("chart-managed", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB)
		s := get[*corev1.Secret](t, r, fullname)
		if isHook(s.ObjectMeta) {
			t.Error("the release Secret is a hook: Helm would never delete it")
		}
		if got := string(s.Data["DATABASE_URL"]); got != databaseURL {
			t.Errorf("DATABASE_URL = %q, want %q", got, databaseURL)
		}
		jwt, cluster := s.Data["SWITCHBOARD_JWT_SECRET"], s.Data["SWITCHBOARD_CLUSTER_SECRET"]
		if len(jwt) < 32 || len(cluster) < 32 || string(jwt) == string(cluster) {
			t.Errorf("generated secrets: jwt %d bytes, cluster %d bytes, equal %v; want two distinct ≥32-byte values",
				len(jwt), len(cluster), string(jwt) == string(cluster))
		}
	})
	t.Run("values win over generation", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `secret: {jwtSecret: jwt-secret-from-values, clusterSecret: cluster-secret}`)
		s := get[*corev1.Secret](t, r, fullname)
		if string(s.Data["SWITCHBOARD_JWT_SECRET"]) != "jwt-secret-from-values" || string(s.Data["SWITCHBOARD_CLUSTER_SECRET"]) != "cluster-secret" {
			t.Errorf("data = %v", s.Data)
		}
	})
	t.Run("existing secret", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "existing-secret")...)
		if secrets := all[*corev1.Secret](r); len(secrets) != 0 {
			t.Errorf("chart renders Secrets %v alongside existingSecret", secretNames(secrets))
		}
		for _, d := range all[*appsv1.Deployment](r) {
			c := container(t, d.Spec.Template.Spec, "switchboard")
			assertSecretRef(t, c, "DATABASE_URL", "switchboard-credentials", "url")
			assertSecretRef(t, c, "SWITCHBOARD_JWT_SECRET", "switchboard-credentials", "jwt")
			assertSecretRef(t, c, "SWITCHBOARD_CLUSTER_SECRET", "switchboard-credentials", "cluster")
			if _, ok := d.Spec.Template.Annotations["checksum/secret"]; ok {
				t.Errorf("%s: checksum of values the chart does not own", d.Name)
			}
		}
		job := get[*batchv1.Job](t, r, fullname+"-migrate")
		assertSecretRef(t, container(t, job.Spec.Template.Spec, "migrate"), "DATABASE_URL", "switchboard-credentials", "url")
	})
}

func TestMigrationHook(t *testing.T) {
	t.Parallel()
	for _, sc := range []string{"defaults", "existing-secret", "everything"} {
		t.Run(sc, func(t *testing.T) {
			t.Parallel()
			r := render(t, scenarioValues(t, sc)...)
			job := get[*batchv1.Job](t, r, fullname+"-migrate")
			c := container(t, job.Spec.Template.Spec, "migrate")

			t.Run("hook annotations", func(t *testing.T) {
				t.Parallel()
				if got := hookEvents(job.ObjectMeta); !slices.Equal(got, []string{"pre-install", "pre-upgrade"}) {
					t.Errorf("%s = %q, want pre-install,pre-upgrade", hookAnnotation, job.Annotations[hookAnnotation])
				}
				policy := strings.Split(job.Annotations[deleteAnnotation], ",")
				if !slices.Contains(policy, "before-hook-creation") {
					t.Errorf("%s = %q: a leftover Job from the last release would block the next", deleteAnnotation, job.Annotations[deleteAnnotation])
				}
			})
			t.Run("runs migrate once", func(t *testing.T) {
				t.Parallel()
				if !slices.Equal(c.Args, []string{"migrate"}) || len(c.Command) != 0 {
					t.Errorf("command %q args %q, want the entrypoint with [migrate]", c.Command, c.Args)
				}
				if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
					t.Errorf("restartPolicy = %s", job.Spec.Template.Spec.RestartPolicy)
				}
				if job.Spec.BackoffLimit == nil || job.Spec.ActiveDeadlineSeconds == nil {
					t.Error("no backoffLimit/activeDeadlineSeconds: a broken migration would retry forever")
				}
				assertLockedDown(t, job.Spec.Template.Spec, c)
			})
			t.Run("secrets exist before the hook", func(t *testing.T) {
				t.Parallel()
				assertHookSecretsAvailable(t, r, job, c)
			})
			t.Run("full configuration", func(t *testing.T) {
				t.Parallel()
				// migrate validates the whole config: with DATABASE_URL it wants the JWT secret.
				for _, env := range []string{"DATABASE_URL", "SWITCHBOARD_JWT_SECRET", "SWITCHBOARD_CLUSTER_SECRET"} {
					if e := findEnv(c, env); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
						t.Errorf("migrate env %s = %s, want a secretKeyRef", env, yamlOf(e))
					}
				}
				web := container(t, get[*appsv1.Deployment](t, r, fullname+"-web").Spec.Template.Spec, "switchboard")
				for _, env := range []string{"DATABASE_URL", "SWITCHBOARD_JWT_SECRET"} {
					if sameSource(t, r, findEnv(c, env), findEnv(web, env)) {
						continue
					}
					t.Errorf("migrate %s comes from %s, web's from %s: not the same value", env, yamlOf(findEnv(c, env)), yamlOf(findEnv(web, env)))
				}
			})
			t.Run("same image as the pools", func(t *testing.T) {
				t.Parallel()
				web := get[*appsv1.Deployment](t, r, fullname+"-web")
				if img := container(t, web.Spec.Template.Spec, "switchboard").Image; img != c.Image {
					t.Errorf("migrate image %q, web image %q", c.Image, img)
				}
			})
		})
	}
	t.Run("disabled", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "migrations-off")...)
		if jobs := all[*batchv1.Job](r); len(jobs) != 0 {
			t.Errorf("%d Jobs rendered with migrations.enabled=false", len(jobs))
		}
		for _, s := range all[*corev1.Secret](r) {
			if isHook(s.ObjectMeta) {
				t.Errorf("hook Secret %s rendered without the migration hook", s.Name)
			}
		}
	})
}

// assertHookSecretsAvailable: a pre-install hook runs before the release's own objects
// exist, so each Secret it reads must be a hook of an earlier weight (or one the chart
// does not render at all, i.e. an existing Secret the operator manages).
func assertHookSecretsAvailable(t *testing.T, r rendered, job *batchv1.Job, c corev1.Container) {
	t.Helper()
	jobWeight := hookWeight(t, job.ObjectMeta)
	refs := 0
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		refs++
		ref := e.ValueFrom.SecretKeyRef
		s, rendered := find[*corev1.Secret](r, ref.Name)
		if !rendered {
			continue
		}
		switch {
		case !isHook(s.ObjectMeta):
			t.Errorf("%s reads Secret %s, a release resource that does not exist yet at pre-install", e.Name, ref.Name)
		case !slices.Equal(hookEvents(s.ObjectMeta), hookEvents(job.ObjectMeta)):
			t.Errorf("Secret %s hooks %v, Job hooks %v", s.Name, hookEvents(s.ObjectMeta), hookEvents(job.ObjectMeta))
		case hookWeight(t, s.ObjectMeta) >= jobWeight:
			t.Errorf("Secret %s weight %d is not below the Job's %d", s.Name, hookWeight(t, s.ObjectMeta), jobWeight)
		case s.Data[ref.Key] == nil && s.StringData[ref.Key] == "":
			t.Errorf("Secret %s has no key %s", s.Name, ref.Key)
		}
	}
	if refs == 0 || findEnv(c, "DATABASE_URL") == nil {
		t.Error("migration Job gets no DATABASE_URL")
	}
}

// sameSource reports whether two secret-backed env vars resolve to the same value: the
// same Secret and key, or rendered Secrets holding the same bytes under those keys.
func sameSource(t *testing.T, r rendered, a, b *corev1.EnvVar) bool {
	t.Helper()
	if a == nil || b == nil || a.ValueFrom == nil || b.ValueFrom == nil || a.ValueFrom.SecretKeyRef == nil || b.ValueFrom.SecretKeyRef == nil {
		return false
	}
	ra, rb := a.ValueFrom.SecretKeyRef, b.ValueFrom.SecretKeyRef
	if ra.Name == rb.Name && ra.Key == rb.Key {
		return true
	}
	sa, okA := find[*corev1.Secret](r, ra.Name)
	sb, okB := find[*corev1.Secret](r, rb.Name)
	return okA && okB && sa.Data[ra.Key] != nil && string(sa.Data[ra.Key]) == string(sb.Data[rb.Key])
}

func isHook(m metav1.ObjectMeta) bool { return m.Annotations[hookAnnotation] != "" }

func hookEvents(m metav1.ObjectMeta) []string {
	var out []string
	for _, e := range strings.Split(m.Annotations[hookAnnotation], ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

func hookWeight(t *testing.T, m metav1.ObjectMeta) int {
	t.Helper()
	w, ok := m.Annotations[weightAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(w)
	if err != nil {
		t.Fatalf("%s: %s = %q: %v", m.Name, weightAnnotation, w, err)
	}
	return n
}

func secretNames(ss []*corev1.Secret) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}
