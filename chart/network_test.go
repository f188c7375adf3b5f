package chart_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestServices(t *testing.T) {
	t.Parallel()
	r := render(t, withDB)

	t.Run("web service fronts web pods only", func(t *testing.T) {
		t.Parallel()
		svc := get[*corev1.Service](t, r, fullname)
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		web := get[*appsv1.Deployment](t, r, fullname+"-web")
		if len(svc.Spec.Selector) == 0 || !sel.Matches(labels.Set(web.Spec.Template.Labels)) {
			t.Errorf("selector %v does not match web pods %v", svc.Spec.Selector, web.Spec.Template.Labels)
		}
		if sel.Matches(labels.Set(workerPodLabels(t, r))) {
			t.Errorf("selector %v routes traffic to worker pods", svc.Spec.Selector)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" || svc.Spec.Ports[0].Port != 80 {
			t.Errorf("ports = %s, want 80 -> http", yamlOf(svc.Spec.Ports))
		}
		if resolvePort(container(t, web.Spec.Template.Spec, "switchboard"), svc.Spec.Ports[0].TargetPort) != containerPort {
			t.Errorf("targetPort %s is not the container's %d", svc.Spec.Ports[0].TargetPort.String(), containerPort)
		}
	})
	t.Run("headless worker service", func(t *testing.T) {
		t.Parallel()
		svc := get[*corev1.Service](t, r, fullname+"-worker")
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("clusterIP = %q, want None", svc.Spec.ClusterIP)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(workerPodLabels(t, r))) {
			t.Errorf("selector %v does not match worker pods", svc.Spec.Selector)
		}
	})
}

func TestIngress(t *testing.T) {
	t.Parallel()

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		if ing := all[*networkingv1.Ingress](render(t, withDB)); len(ing) != 0 {
			t.Errorf("%d Ingresses rendered by default", len(ing))
		}
	})
	t.Run("websocket timeouts", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "ingress")...)
		ing := get[*networkingv1.Ingress](t, r, fullname)
		for _, a := range []string{"nginx.ingress.kubernetes.io/proxy-read-timeout", "nginx.ingress.kubernetes.io/proxy-send-timeout"} {
			if got := ing.Annotations[a]; got != "3600" {
				t.Errorf("%s = %q, want 3600 so idle WebSockets survive", a, got)
			}
		}
		if ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" {
			t.Errorf("annotations from values lost: %v", ing.Annotations)
		}
		if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
			t.Errorf("ingressClassName = %v", ing.Spec.IngressClassName)
		}
		if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "switchboard-tls" {
			t.Errorf("tls = %s", yamlOf(ing.Spec.TLS))
		}
		if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "switchboard.example.com" {
			t.Fatalf("rules = %s", yamlOf(ing.Spec.Rules))
		}
		svc := get[*corev1.Service](t, r, fullname)
		for _, p := range ing.Spec.Rules[0].HTTP.Paths {
			b := p.Backend.Service
			if b == nil || b.Name != svc.Name || b.Port.Name != svc.Spec.Ports[0].Name {
				t.Errorf("path %s backend = %s, want service %s port %s", p.Path, yamlOf(p.Backend), svc.Name, svc.Spec.Ports[0].Name)
			}
		}
	})
	t.Run("values override timeouts", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `ingress: {enabled: true, websocketTimeoutSeconds: 600, annotations: {nginx.ingress.kubernetes.io/proxy-send-timeout: "120"}}`)
		ing := get[*networkingv1.Ingress](t, r, fullname)
		if ing.Annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"] != "600" ||
			ing.Annotations["nginx.ingress.kubernetes.io/proxy-send-timeout"] != "120" {
			t.Errorf("annotations = %v", ing.Annotations)
		}
	})
}

func TestServiceMonitor(t *testing.T) {
	t.Parallel()

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		if sm := render(t, withDB).monitors; len(sm) != 0 {
			t.Errorf("%d ServiceMonitors rendered by default", len(sm))
		}
	})
	t.Run("scrapes web and worker", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "everything")...)
		if len(r.monitors) != 1 {
			t.Fatalf("%d ServiceMonitors, want 1", len(r.monitors))
		}
		sm := r.monitors[0]
		if sm.Labels["release"] != "prometheus" {
			t.Errorf("labels = %v, want the extra label from values", sm.Labels)
		}
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		var matched []string
		for _, svc := range all[*corev1.Service](r) {
			if sel.Matches(labels.Set(svc.Labels)) {
				matched = append(matched, svc.Name)
			}
		}
		slices.Sort(matched)
		if want := []string{fullname, fullname + "-worker"}; !slices.Equal(matched, want) {
			t.Errorf("selects Services %v, want %v", matched, want)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != metricsPath {
			t.Errorf("endpoints = %s, want port http path %s", yamlOf(sm.Spec.Endpoints), metricsPath)
		}
	})
}
