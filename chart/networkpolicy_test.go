package chart_test

import (
	"net/netip"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// peer is one end of a connection as a NetworkPolicy sees it: a pod (its labels and its
// namespace's labels) or an address outside the cluster.
type peer struct {
	pod, ns map[string]string
	ip      string
}

func podIn(namespace string, pod map[string]string) peer {
	return peer{pod: pod, ns: map[string]string{"kubernetes.io/metadata.name": namespace}}
}

// matches is NetworkPolicyPeer semantics: a podSelector alone means pods of the
// policy's namespace; a namespaceSelector (with or without a podSelector) other
// namespaces; an ipBlock addresses.
func (p peer) matches(t *testing.T, np networkingv1.NetworkPolicyPeer) bool {
	t.Helper()
	if np.IPBlock != nil {
		if p.ip == "" {
			return false
		}
		ip := netip.MustParseAddr(p.ip)
		in := netip.MustParsePrefix(np.IPBlock.CIDR).Contains(ip)
		for _, ex := range np.IPBlock.Except {
			in = in && !netip.MustParsePrefix(ex).Contains(ip)
		}
		return in
	}
	if p.pod == nil {
		return false
	}
	if np.NamespaceSelector == nil && p.ns["kubernetes.io/metadata.name"] != namespace {
		return false
	}
	if np.NamespaceSelector != nil && !labelsMatch(t, np.NamespaceSelector, p.ns) {
		return false
	}
	return np.PodSelector == nil || labelsMatch(t, np.PodSelector, p.pod)
}

func labelsMatch(t *testing.T, ls *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(labels.Set(l))
}

// portAllowed: no ports means every port; "http" is the pods' named container port.
func portAllowed(ports []networkingv1.NetworkPolicyPort, port int, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pr := corev1.ProtocolTCP
		if p.Protocol != nil {
			pr = *p.Protocol
		}
		if pr != proto || p.Port == nil {
			continue
		}
		if *p.Port == intstr.FromInt32(int32(port)) || port == containerPort && *p.Port == intstr.FromString("http") {
			return true
		}
	}
	return false
}

func peersMatch(t *testing.T, peers []networkingv1.NetworkPolicyPeer, p peer) bool {
	if len(peers) == 0 {
		return true
	}
	for _, np := range peers {
		if p.matches(t, np) {
			return true
		}
	}
	return false
}

func egressAllowed(t *testing.T, pol *networkingv1.NetworkPolicy, to peer, port int, proto corev1.Protocol) bool {
	t.Helper()
	for _, r := range pol.Spec.Egress {
		if peersMatch(t, r.To, to) && portAllowed(r.Ports, port, proto) {
			return true
		}
	}
	return false
}

func ingressAllowed(t *testing.T, pol *networkingv1.NetworkPolicy, from peer, port int) bool {
	t.Helper()
	for _, r := range pol.Spec.Ingress {
		if peersMatch(t, r.From, from) && portAllowed(r.Ports, port, corev1.ProtocolTCP) {
			return true
		}
	}
	return false
}

func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	kubeDNS := podIn("kube-system", map[string]string{"k8s-app": "kube-dns"})
	nginx := podIn("ingress-nginx", map[string]string{"app": "ingress-nginx"})
	stranger := podIn("other", map[string]string{"app": "x"})
	webhookTarget := peer{ip: "203.0.113.7"}

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		if n := all[*networkingv1.NetworkPolicy](render(t, withDB)); len(n) != 0 {
			t.Errorf("%d NetworkPolicies rendered by default", len(n))
		}
	})
	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB, `networkPolicy: {enabled: true}`)
		pol := get[*networkingv1.NetworkPolicy](t, r, fullname)
		web := podIn(namespace, webPodLabels(t, r))
		worker := podIn(namespace, workerPodLabels(t, r))
		migrate := podIn(namespace, get[*batchv1.Job](t, r, fullname+"-migrate").Spec.Template.Labels)
		for name, p := range map[string]peer{"web": web, "worker": worker, "migrate": migrate} {
			if !labelsMatch(t, &pol.Spec.PodSelector, p.pod) {
				t.Errorf("the policy does not select the %s pods", name)
			}
		}
		checks := []struct {
			what string
			ok   bool
		}{
			{"web -> worker on http (node-to-node)", egressAllowed(t, pol, worker, containerPort, corev1.ProtocolTCP) && ingressAllowed(t, pol, web, containerPort)},
			{"worker -> web on http", egressAllowed(t, pol, web, containerPort, corev1.ProtocolTCP)},
			{"DNS over UDP", egressAllowed(t, pol, kubeDNS, 53, corev1.ProtocolUDP)},
			{"DNS over TCP", egressAllowed(t, pol, kubeDNS, 53, corev1.ProtocolTCP)},
			{"Postgres anywhere", egressAllowed(t, pol, peer{ip: "10.9.8.7"}, 5432, corev1.ProtocolTCP)},
			{"webhooks anywhere, any port", egressAllowed(t, pol, webhookTarget, 8443, corev1.ProtocolTCP) && egressAllowed(t, pol, peer{ip: "2001:db8::1"}, 443, corev1.ProtocolTCP)},
			{"clients from anywhere on http", ingressAllowed(t, pol, stranger, containerPort)},
			{"nothing in on another port", !ingressAllowed(t, pol, web, 9090)},
		}
		for _, c := range checks {
			if !c.ok {
				t.Errorf("%s: not as wanted\n%s", c.what, yamlOf(pol.Spec))
			}
		}
	})
	t.Run("narrowed", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "network-policy")...)
		pol := get[*networkingv1.NetworkPolicy](t, r, fullname)
		checks := []struct {
			what string
			ok   bool
		}{
			{"the ingress controller reaches http", ingressAllowed(t, pol, nginx, containerPort)},
			{"another namespace does not", !ingressAllowed(t, pol, stranger, containerPort)},
			{"Postgres in its range, both ports", egressAllowed(t, pol, peer{ip: "10.20.1.1"}, 6432, corev1.ProtocolTCP)},
			{"no Postgres outside its range", !egressAllowed(t, pol, peer{ip: "10.30.1.1"}, 5432, corev1.ProtocolTCP)},
			{"webhooks on 443 only", egressAllowed(t, pol, webhookTarget, 443, corev1.ProtocolTCP) && !egressAllowed(t, pol, webhookTarget, 80, corev1.ProtocolTCP)},
			{"the extra rule", egressAllowed(t, pol, podIn(namespace, map[string]string{"app": "otel-collector"}), 4318, corev1.ProtocolTCP)},
		}
		for _, c := range checks {
			if !c.ok {
				t.Errorf("%s: not as wanted\n%s", c.what, yamlOf(pol.Spec))
			}
		}
	})
	t.Run("cnpg, webhooks off", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "network-policy-cnpg")...)
		pol := get[*networkingv1.NetworkPolicy](t, r, fullname)
		instance := podIn(namespace, map[string]string{"cnpg.io/cluster": cnpgCluster})
		pooler := podIn(namespace, map[string]string{"cnpg.io/poolerName": cnpgCluster + "-pooler"})
		if !egressAllowed(t, pol, instance, 5432, corev1.ProtocolTCP) || !egressAllowed(t, pol, pooler, 5432, corev1.ProtocolTCP) {
			t.Errorf("the CloudNativePG instances or Pooler are unreachable:\n%s", yamlOf(pol.Spec.Egress))
		}
		if egressAllowed(t, pol, webhookTarget, 443, corev1.ProtocolTCP) {
			t.Errorf("webhooks reach anywhere with networkPolicy.egress.webhooks.enabled=false")
		}
	})
}

func webPodLabels(t *testing.T, r rendered) map[string]string {
	t.Helper()
	return get[*appsv1.Deployment](t, r, fullname+"-web").Spec.Template.Labels
}
