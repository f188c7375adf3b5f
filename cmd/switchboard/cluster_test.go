package main

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/web"
)

// startCluster starts n replicas on one database, with boss@example.com as
// admin, and returns them with an admin token.
func startCluster(t *testing.T, n int) ([]*testServer, string) {
	t.Helper()
	dbURL := dbtest.NewDatabaseURL(t)
	servers := make([]*testServer, n)
	for i := range servers {
		servers[i] = startServer(t, testConfig(t, dbURL))
	}
	admin, _ := registerUser(t, servers[0], "boss@example.com")
	runAdmin(t, servers[0], "grant", "boss@example.com")
	return servers, admin
}

// crash makes a replica vanish as a killed process would to the others:
// no more heartbeats, nothing listening, its row left behind.
func (s *testServer) crash() {
	s.cluster.StopHeartbeat()
	if s.rt.Presence != nil {
		s.rt.Presence.StopWriting()
	}
	_ = s.http.Close()
}

func nodesOf(t *testing.T, body map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	list, _ := body["nodes"].([]any)
	for _, n := range list {
		m := n.(map[string]any)
		out[m["id"].(string)] = m
	}
	return out
}

func TestClusterStatusFromAnyNode(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	for i, s := range servers {
		// Each node waits half a second for the others' answers: on a
		// loaded machine one may be late once, so ask again until each
		// has answered in time.
		testwait.For(t, time.Minute, fmt.Sprintf("every node reachable from node %d", i), func() bool {
			status, body := call(t, http.MethodGet, s.URL+"/v1/cluster/status", nil, admin)
			nodes := nodesOf(t, body)
			if status != http.StatusOK || len(nodes) != 3 {
				t.Fatalf("status from node %d: %d %v", i, status, body)
			}
			for _, other := range servers {
				n := nodes[other.nodeID]
				if n == nil || n["addr"] != other.Addr() || n["draining"] != false {
					t.Fatalf("node %s as seen from node %d: %v", other.nodeID, i, n)
				}
				if n["reachable"] != true {
					return false
				}
			}
			return body["degraded"] == false
		})
	}

	servers[2].crash()
	start := time.Now()
	status, body := call(t, http.MethodGet, servers[1].URL+"/v1/cluster/status", nil, admin)
	took := time.Since(start)
	nodes := nodesOf(t, body)
	if status != http.StatusOK || body["degraded"] != true || len(nodes) != 3 {
		t.Fatalf("status with a node down, in %s: %d %v", took, status, body)
	}
	for id, n := range nodes {
		if want := id != servers[2].nodeID; n["reachable"] != want {
			t.Fatalf("node %s reachable=%v, want %v", id, n["reachable"], want)
		}
	}
	t.Logf("status with one node down answered in %s", took.Round(time.Millisecond))
}

// signedRequest sends a request signed with the test cluster secret, or
// with the given tweak applied after signing.
func signedRequest(t *testing.T, method, url string, body []byte, signedBody []byte, at time.Time) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	cluster.Sign(req, []byte("test-cluster-secret-0123456789"), "test", signedBody, at)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestInternalRoutesRefuseUnsignedCalls(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 1)
	s := servers[0]
	drain := s.URL + cluster.InternalPrefix + "/nodes/" + s.nodeID + "/drain"
	now := time.Now()
	for _, tc := range []struct {
		name   string
		status func() int
	}{
		{"no signature", func() int { status, _ := call(t, http.MethodPost, drain, nil, ""); return status }},
		{"bad signature", func() int {
			req, _ := http.NewRequest(http.MethodPost, drain, nil)
			req.Header.Set(cluster.HeaderTimestamp, "1700000000")
			req.Header.Set(cluster.HeaderSignature, "v1=deadbeef")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}},
		{"replayed old timestamp", func() int { return signedRequest(t, http.MethodPost, drain, nil, nil, now.Add(-time.Minute)) }},
		{"valid signature over a different body", func() int {
			return signedRequest(t, http.MethodPost, drain, []byte(`{"a":2}`), []byte(`{"a":1}`), now)
		}},
	} {
		if got := tc.status(); got != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", tc.name, got)
		}
	}
	if s.cluster.Draining() {
		t.Fatal("a refused call drained the node")
	}
	if got := signedRequest(t, http.MethodPost, drain, nil, nil, now); got != http.StatusOK || !s.cluster.Draining() {
		t.Fatalf("signed drain: %d", got)
	}
}

func TestSignedCallIsNotFannedOutAgain(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	a := servers[0]
	status := signedRequest(t, http.MethodPost, a.URL+cluster.InternalPrefix+"/nodes/"+a.nodeID+"/actions/"+web.ActionDisconnectUser+"?arg="+a.nodeID, nil, nil, time.Now())
	if status != http.StatusOK {
		t.Fatalf("signed disconnect: %d", status)
	}
	for i, s := range servers {
		if s.cluster.CallsSent() != 0 || (i > 0 && s.cluster.CallsReceived() != 0) {
			t.Fatalf("node %d sent %d and received %d calls after one signed call to node 0", i, s.cluster.CallsSent(), s.cluster.CallsReceived())
		}
	}
	// The public route fans out once: one call to each other node.
	_, victim := registerUser(t, a, "victim@example.com")
	status, body := call(t, http.MethodPost, a.URL+"/v1/admin/users/"+victim+"/disconnect", nil, admin)
	if status != http.StatusOK || len(body["acked"].([]any)) != 3 {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	if a.cluster.CallsSent() != 2 || servers[1].cluster.CallsReceived() != 1 || servers[2].cluster.CallsReceived() != 1 ||
		servers[1].cluster.CallsSent() != 0 || servers[2].cluster.CallsSent() != 0 {
		t.Fatal("the fan-out did not make exactly one call per other node")
	}
}

func TestDisconnectReportsNodesThatFailed(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	_, victim := registerUser(t, servers[0], "victim@example.com")
	servers[1].crash()
	status, body := call(t, http.MethodPost, servers[2].URL+"/v1/admin/users/"+victim+"/disconnect", nil, admin)
	if status != http.StatusOK {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	acked, failed := body["acked"].([]any), body["failed"].([]any)
	if len(acked) != 2 || len(failed) != 1 || failed[0] != servers[1].nodeID || slices.Contains(acked, any(servers[1].nodeID)) {
		t.Fatalf("acked %v failed %v", acked, failed)
	}
}

func TestDrainANodeFromAnother(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	target := servers[1]
	status, body := call(t, http.MethodPost, servers[0].URL+"/v1/admin/nodes/"+target.nodeID+"/drain", nil, admin)
	if status != http.StatusOK || body["acked"] != true {
		t.Fatalf("drain: %d %v", status, body)
	}
	if status, body := call(t, http.MethodGet, target.URL+"/healthz/ready", nil, ""); status != http.StatusServiceUnavailable {
		t.Fatalf("drained node ready: %d %v", status, body)
	}
	for _, s := range []*testServer{servers[0], servers[2]} {
		if status, body := call(t, http.MethodGet, s.URL+"/healthz/ready", nil, ""); status != http.StatusOK {
			t.Fatalf("other node not ready: %d %v", status, body)
		}
	}
	select {
	case <-target.jobs.queue.Client().Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("the drained node's River client still takes jobs")
	}
	_, body = call(t, http.MethodGet, servers[2].URL+"/v1/cluster/status", nil, admin)
	for id, n := range nodesOf(t, body) {
		if n["draining"] != (id == target.nodeID) || n["reachable"] != true {
			t.Fatalf("node %s in status: %v", id, n)
		}
	}
	// The drained node still answers, including admin calls.
	if status, _ := call(t, http.MethodGet, target.URL+"/v1/cluster/status", nil, admin); status != http.StatusOK {
		t.Fatalf("drained node stopped serving: %d", status)
	}
	status, body = call(t, http.MethodPost, servers[0].URL+"/v1/admin/nodes/00000000-0000-0000-0000-000000000000/drain", nil, admin)
	if status != http.StatusNotFound {
		t.Fatalf("unknown node: %d %v", status, body)
	}
}

func TestStopDeregisters(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 2)
	servers[1].Stop()
	status, body := call(t, http.MethodGet, servers[0].URL+"/v1/cluster/status", nil, admin)
	if nodes := nodesOf(t, body); status != http.StatusOK || len(nodes) != 1 || body["degraded"] != false {
		t.Fatalf("status after a graceful stop: %d %v", status, body)
	}
}

func TestSIGTERMDrainsThenExits(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	p := startProcess(t, dbURL)
	id := p.nodeID(t, dbURL)
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Output())
	}
	if n := countNodes(t, dbURL, id); n != 0 {
		t.Fatalf("node still registered after a graceful exit")
	}
}

func TestWorkerOnlyNodeAnswersAndDrains(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 1)
	cfg := testConfig(t, servers[0].cfg.DatabaseURL)
	cfg.Roles = []string{config.RoleWorker}
	worker := startServer(t, cfg)
	_, body := call(t, http.MethodGet, servers[0].URL+"/v1/cluster/status", nil, admin)
	n := nodesOf(t, body)[worker.nodeID]
	if body["degraded"] != false || n == nil || n["reachable"] != true || n["roles"].([]any)[0] != "worker" {
		t.Fatalf("worker-only node in status: %v", body)
	}
	if status, body := call(t, http.MethodPost, servers[0].URL+"/v1/admin/nodes/"+worker.nodeID+"/drain", nil, admin); status != http.StatusOK {
		t.Fatalf("drain the worker: %d %v", status, body)
	}
	if status, _ := call(t, http.MethodGet, worker.URL+"/healthz/ready", nil, ""); status != http.StatusServiceUnavailable {
		t.Fatalf("drained worker ready: %d", status)
	}
	if status, _ := call(t, http.MethodGet, worker.URL+"/v1/cluster/status", nil, admin); status != http.StatusNotFound {
		t.Fatalf("public API on a worker-only node: %d", status)
	}
}
