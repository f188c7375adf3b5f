package chart_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// podSpecs are the pod templates of the web and worker Deployments and the migration Job.
func podSpecs(t *testing.T, r rendered) map[string]corev1.PodSpec {
	t.Helper()
	return map[string]corev1.PodSpec{
		"web":     webPod(t, r),
		"worker":  workerPod(t, r),
		"migrate": get[*batchv1.Job](t, r, fullname+"-migrate").Spec.Template.Spec,
	}
}

func TestServiceAccount(t *testing.T) {
	t.Parallel()

	t.Run("created by default and used by every pod", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB)
		sa := get[*corev1.ServiceAccount](t, r, fullname)
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("the ServiceAccount mounts an API token; Switchboard never uses one")
		}
		hook := get[*corev1.ServiceAccount](t, r, fullname+"-migrate")
		if hook.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" || hook.Annotations["helm.sh/hook-weight"] != "-10" {
			t.Errorf("the migration hook's account is not created before the hook Job: %v", hook.Annotations)
		}
		for name, spec := range podSpecs(t, r) {
			want := fullname
			if name == "migrate" {
				want = fullname + "-migrate" // the release's account does not exist yet at pre-install
			}
			if spec.ServiceAccountName != want {
				t.Errorf("%s pods run as %q, want %q", name, spec.ServiceAccountName, want)
			}
		}
	})
	t.Run("name and annotations", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "service-account")...)
		for _, name := range []string{"sb", fullname + "-migrate"} {
			sa := get[*corev1.ServiceAccount](t, r, name)
			if sa.Annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::123456789012:role/sb" {
				t.Errorf("%s annotations = %v, want the workload identity from values", name, sa.Annotations)
			}
		}
		if got := webPod(t, r).ServiceAccountName; got != "sb" {
			t.Errorf("web pods run as %q, want sb", got)
		}
	})
	t.Run("existing account", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "everything")...)
		if sas := all[*corev1.ServiceAccount](r); len(sas) != 0 {
			t.Errorf("%d ServiceAccounts rendered with serviceAccount.create=false", len(sas))
		}
		for name, spec := range podSpecs(t, r) {
			if spec.ServiceAccountName != "switchboard" {
				t.Errorf("%s pods run as %q, want the existing switchboard", name, spec.ServiceAccountName)
			}
		}
	})
	t.Run("default account", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `serviceAccount: {create: false}`)
		for name, spec := range podSpecs(t, r) {
			if spec.ServiceAccountName != "" {
				t.Errorf("%s pods run as %q, want the namespace's default", name, spec.ServiceAccountName)
			}
		}
	})
	t.Run("the old key is refused", func(t *testing.T) {
		t.Parallel()
		if _, err := tryRender(withDB, `serviceAccountName: sb`); err == nil {
			t.Error("serviceAccountName (now serviceAccount.name) was accepted and would be ignored")
		}
	})
}

func webPod(t *testing.T, r rendered) corev1.PodSpec {
	t.Helper()
	return get[*appsv1.Deployment](t, r, fullname+"-web").Spec.Template.Spec
}

func workerPod(t *testing.T, r rendered) corev1.PodSpec {
	t.Helper()
	return get[*appsv1.Deployment](t, r, fullname+"-worker").Spec.Template.Spec
}
