package web

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/freeport"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime"
)

// oneRoomSockets is a node's realtime hub with some users in room "lobby".
type oneRoomSockets struct {
	mu    sync.Mutex
	lobby map[string]int
}

func (f *oneRoomSockets) LocalConnections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.lobby)
}
func (f *oneRoomSockets) DisconnectUserLocal(user string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.lobby[user]
	delete(f.lobby, user)
	return n
}
func (f *oneRoomSockets) RoomMembersLocal(room string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	if room == "lobby" {
		for u, n := range f.lobby {
			out[u] = n
		}
	}
	return out
}
func (f *oneRoomSockets) DrainLocal() {}

type clusterBundle struct {
	*testBundle
	cluster *cluster.Cluster
	sockets *oneRoomSockets
}

func setupCluster(t *testing.T) *clusterBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	sockets := &oneRoomSockets{lobby: map[string]int{}}
	c := cluster.New(cluster.Options{DB: pool, NodeID: uuid.NewString(), Secret: testSecret, Sockets: sockets,
		Actions: []cluster.Action{{Name: ActionDisconnectUser, Apply: func(_ context.Context, user string) int { return sockets.DisconnectUserLocal(user) }}}})
	s := New(Options{
		Pool: pool, Registry: prometheus.NewRegistry(), PublicAPI: true, JWTSecret: testSecret, BcryptCost: 4,
		Cluster: c, Presence: realtime.PresenceReader{DB: pool}, Rooms: realtime.Rooms{DB: pool},
	})
	return &clusterBundle{testBundle: &testBundle{server: s}, cluster: c, sockets: sockets}
}

// registerNode adds a node that other nodes would reach at addr.
func (b *clusterBundle) registerNode(t *testing.T, addr string) string {
	t.Helper()
	id := uuid.NewString()
	_, err := b.server.opts.Pool.Exec(context.Background(), `
		INSERT INTO cluster_nodes (id, name, addr, roles, version, started_at) VALUES ($1, 'other', $2, '{worker}', 'test', now())`, id, addr)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestClusterRoutesNeedAdmin(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	user, _ := b.register(t, "someone@example.com")
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/cluster/status"},
		{http.MethodPost, "/v1/admin/users/" + uuid.NewString() + "/disconnect"},
		{http.MethodPost, "/v1/admin/nodes/" + b.cluster.NodeID() + "/drain"},
	} {
		requireProblem(t, b.do(t, r.method, r.path, nil, ""), http.StatusUnauthorized)
		requireProblem(t, b.do(t, r.method, r.path, nil, user), http.StatusForbidden)
	}
	if b.cluster.Draining() {
		t.Fatal("a user drained the node")
	}
}

func TestClusterStatusRoute(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	admin, _ := b.registerAdmin(t, "boss@example.com")
	res := b.do(t, http.MethodGet, "/v1/cluster/status", nil, admin)
	if res.status != http.StatusOK || res.body["degraded"] != false {
		t.Fatalf("status: %d %s", res.status, res.raw)
	}
	nodes := res.body["nodes"].([]any)
	node := nodes[0].(map[string]any)
	for _, k := range []string{"id", "name", "addr", "roles", "version", "started_at", "heartbeat_age_ms", "reachable", "draining", "ws_connections", "jobs_running"} {
		if _, ok := node[k]; !ok {
			t.Errorf("node has no %q: %v", k, node)
		}
	}
	for _, k := range []string{"available", "running", "scheduled", "retryable", "discarded"} {
		if _, ok := res.body["queue"].(map[string]any)[k]; !ok {
			t.Errorf("queue has no %q", k)
		}
	}
	for _, k := range []string{"due_tasks", "oldest_due_age_ms"} {
		if _, ok := res.body["scheduler"].(map[string]any)[k]; !ok {
			t.Errorf("scheduler has no %q", k)
		}
	}
	for _, k := range []string{"demand", "available_jobs", "scheduled_jobs", "scheduled_due_jobs", "running_jobs",
		"oldest_available_age_ms", "due_tasks", "oldest_due_age_ms", "notification_queue_usage"} {
		if _, ok := res.body["backlog"].(map[string]any)[k]; !ok {
			t.Errorf("backlog has no %q", k)
		}
	}
	if len(nodes) != 1 || node["id"] != b.cluster.NodeID() || node["reachable"] != true {
		t.Fatalf("nodes: %v", nodes)
	}
}

func TestDisconnectRoute(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	admin, _ := b.registerAdmin(t, "boss@example.com")
	victim := uuid.NewString()
	b.sockets.lobby[victim] = 2
	res := b.do(t, http.MethodPost, "/v1/admin/users/"+victim+"/disconnect", nil, admin)
	if res.status != http.StatusOK || res.body["closed"] != float64(2) || len(res.body["acked"].([]any)) != 1 || len(res.body["failed"].([]any)) != 0 {
		t.Fatalf("disconnect: %d %s", res.status, res.raw)
	}
	requireProblem(t, b.do(t, http.MethodPost, "/v1/admin/users/not-a-uuid/disconnect", nil, admin), http.StatusUnprocessableEntity)
}

func TestDrainRoute(t *testing.T) {
	t.Parallel()

	t.Run("unknown node", func(t *testing.T) {
		t.Parallel()
		b := setupCluster(t)
		admin, _ := b.registerAdmin(t, "boss@example.com")
		requireProblem(t, b.do(t, http.MethodPost, "/v1/admin/nodes/"+uuid.NewString()+"/drain", nil, admin), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodPost, "/v1/admin/nodes/nope/drain", nil, admin), http.StatusUnprocessableEntity)
	})

	t.Run("a node that refuses connections", func(t *testing.T) {
		t.Parallel()
		b := setupCluster(t)
		admin, _ := b.registerAdmin(t, "boss@example.com")
		addr, err := freeport.Addr() // nothing listens there
		if err != nil {
			t.Fatal(err)
		}
		requireProblem(t, b.do(t, http.MethodPost, "/v1/admin/nodes/"+b.registerNode(t, addr)+"/drain", nil, admin), http.StatusBadGateway)
	})

	t.Run("a node that never answers", func(t *testing.T) {
		t.Parallel()
		b := setupCluster(t)
		admin, _ := b.registerAdmin(t, "boss@example.com")
		l, _ := net.Listen("tcp", "127.0.0.1:0") // accepts (backlog), never answers
		t.Cleanup(func() { l.Close() })
		requireProblem(t, b.do(t, http.MethodPost, "/v1/admin/nodes/"+b.registerNode(t, l.Addr().String())+"/drain", nil, admin), http.StatusGatewayTimeout)
	})

	t.Run("this node: readiness fails, the node keeps serving", func(t *testing.T) {
		t.Parallel()
		b := setupCluster(t)
		admin, _ := b.registerAdmin(t, "boss@example.com")
		res := b.do(t, http.MethodPost, "/v1/admin/nodes/"+b.cluster.NodeID()+"/drain", nil, admin)
		if res.status != http.StatusOK || res.body["acked"] != true {
			t.Fatalf("drain: %d %s", res.status, res.raw)
		}
		ready := b.do(t, http.MethodGet, "/healthz/ready", nil, "")
		if ready.status != http.StatusServiceUnavailable || !strings.Contains(ready.body["reason"].(string), "draining") {
			t.Fatalf("ready while draining: %d %s", ready.status, ready.raw)
		}
		if res := b.do(t, http.MethodGet, "/healthz/live", nil, ""); res.status != http.StatusOK {
			t.Fatalf("live while draining: %d", res.status)
		}
	})
}

// present stores that node holds n sockets of user in room, as the
// node's PresenceTracker would.
func (b *clusterBundle) present(t *testing.T, room, user, node string, n int) {
	t.Helper()
	_, err := b.server.opts.Pool.Exec(context.Background(),
		`INSERT INTO presence (room, user_id, node_id, connections) VALUES ($1, $2, $3, $4)`, room, user, node, n)
	if err != nil {
		t.Fatal(err)
	}
}

func TestPresenceRoute(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	admin, _ := b.registerAdmin(t, "boss@example.com")
	member, memberID := b.register(t, "member@example.com")
	outsider, _ := b.register(t, "outsider@example.com")
	other := b.registerNode(t, "127.0.0.1:1")
	b.present(t, "lobby", memberID, b.cluster.NodeID(), 1)
	b.present(t, "lobby", memberID, other, 1)
	b.present(t, "elsewhere", uuid.NewString(), other, 3)
	if err := b.cluster.Start(context.Background()); err != nil { // registers this node
		t.Fatal(err)
	}
	t.Cleanup(b.cluster.Stop)
	if _, err := b.server.opts.Rooms.Create(context.Background(), "lobby", memberID, realtime.VisibilityMembers, ""); err != nil {
		t.Fatal(err)
	}

	res := b.do(t, http.MethodGet, "/v1/presence?room=lobby", nil, member)
	if res.status != http.StatusOK || res.body["room"] != "lobby" || res.body["degraded"] != false || len(res.body["unavailable_nodes"].([]any)) != 0 {
		t.Fatalf("member: %d %s", res.status, res.raw)
	}
	users := res.body["users"].([]any)
	if len(users) != 1 || users[0].(map[string]any)["user_id"] != memberID || users[0].(map[string]any)["connections"] != float64(2) {
		t.Fatalf("users: %v", users)
	}
	if res := b.do(t, http.MethodGet, "/v1/presence?room=lobby", nil, admin); res.status != http.StatusOK {
		t.Fatalf("admin: %d %s", res.status, res.raw)
	}
	requireProblem(t, b.do(t, http.MethodGet, "/v1/presence?room=lobby", nil, outsider), http.StatusForbidden)
	// An open room's presence is any signed-in user's to read, as its
	// messages and history are.
	if res := b.do(t, http.MethodGet, "/v1/presence?room=elsewhere", nil, outsider); res.status != http.StatusOK || len(res.body["users"].([]any)) != 1 {
		t.Fatalf("outsider, open room: %d %s", res.status, res.raw)
	}
	requireProblem(t, b.do(t, http.MethodGet, "/v1/presence?room=lobby", nil, ""), http.StatusUnauthorized)
	requireProblem(t, b.do(t, http.MethodGet, "/v1/presence", nil, member), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(t, http.MethodGet, "/v1/presence?room=", nil, member), http.StatusUnprocessableEntity)
	for _, room := range []string{" ", "a\x01b", strings.Repeat("r", 150), " lobby"} {
		requireProblem(t, b.do(t, http.MethodGet, "/v1/presence?"+url.Values{"room": {room}}.Encode(), nil, member), http.StatusUnprocessableEntity)
	}
}

// TestPresenceNamesSilentNodes: members held by a node that stopped
// heartbeating are listed (they leave once it is judged dead) and the node
// is named.
func TestPresenceNamesSilentNodes(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	member, memberID := b.register(t, "member@example.com")
	silent := b.registerNode(t, "127.0.0.1:1")
	_, err := b.server.opts.Pool.Exec(context.Background(), `UPDATE cluster_nodes SET heartbeat_at = now() - interval '6 seconds' WHERE id = $1`, silent)
	if err != nil {
		t.Fatal(err)
	}
	b.present(t, "lobby", memberID, silent, 1)
	res := b.do(t, http.MethodGet, "/v1/presence?room=lobby", nil, member)
	unavailable, _ := res.body["unavailable_nodes"].([]any)
	if res.status != http.StatusOK || res.body["degraded"] != true || len(unavailable) != 1 || unavailable[0] != silent || len(res.body["users"].([]any)) != 1 {
		t.Fatalf("member: %d %s", res.status, res.raw)
	}
}

func TestClusterRoutesInOpenAPI(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	paths := b.do(t, http.MethodGet, "/openapi.json", nil, "").body["paths"].(map[string]any)
	for _, p := range []string{"/v1/cluster/status", "/v1/admin/users/{id}/disconnect", "/v1/admin/nodes/{id}/drain", "/v1/presence"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("%s missing from the OpenAPI document", p)
		}
	}
	for p := range paths {
		if strings.HasPrefix(p, cluster.InternalPrefix) {
			t.Errorf("internal route %s is in the public document", p)
		}
	}
}
