package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/startstoptest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

// fakeSockets stands in for the realtime hub of one node.
type fakeSockets struct {
	mu      sync.Mutex
	users   map[string]int            // user → open sockets
	rooms   map[string]map[string]int // room → user → sockets
	drained bool
}

func newFakeSockets() *fakeSockets {
	return &fakeSockets{users: map[string]int{}, rooms: map[string]map[string]int{}}
}

func (f *fakeSockets) connect(user string, rooms ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[user]++
	for _, r := range rooms {
		if f.rooms[r] == nil {
			f.rooms[r] = map[string]int{}
		}
		f.rooms[r][user]++
	}
}

func (f *fakeSockets) LocalConnections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.users {
		n += c
	}
	return n
}

func (f *fakeSockets) DisconnectUserLocal(user string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.users[user]
	delete(f.users, user)
	for _, m := range f.rooms {
		delete(m, user)
	}
	return n
}

func (f *fakeSockets) RoomMembersLocal(room string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for u, n := range f.rooms[room] {
		out[u] = n
	}
	return out
}

func (f *fakeSockets) DrainLocal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drained = true
}

func (f *fakeSockets) isDrained() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.drained
}

// testNode is one node: its membership, its internal routes on a real
// listener, and its fake sockets.
type testNode struct {
	*Cluster
	srv     *httptest.Server
	sockets *fakeSockets
	drained chan struct{}
	rescue  *rescueHook

	workMu sync.Mutex
	work   Work // what its Work hook reports
}

// rescueHook records the dead nodes a node's RescueJobs hook was given.
type rescueHook struct {
	mu   sync.Mutex
	dead map[string]bool
}

func (h *rescueHook) rescue(_ context.Context, dead []string) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range dead {
		h.dead[id] = true
	}
	return len(dead), nil
}

func (h *rescueHook) saw(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dead[id]
}

func (n *testNode) setWork(w Work) {
	n.workMu.Lock()
	defer n.workMu.Unlock()
	n.work = w
}

func (n *testNode) reportWork(context.Context) (Work, error) {
	n.workMu.Lock()
	defer n.workMu.Unlock()
	return n.work, nil
}

// startNode starts a node on pool; it deregisters when the test ends.
// startNode starts a node on pool; tune, if given, changes its options.
func startNode(t testing.TB, pool *pgxpool.Pool, tune ...func(*Options)) *testNode {
	t.Helper()
	n := &testNode{sockets: newFakeSockets(), drained: make(chan struct{}), rescue: &rescueHook{dead: map[string]bool{}}}
	mux := http.NewServeMux()
	n.srv = httptest.NewServer(mux)
	opts := Options{
		DB: pool, NodeID: uuid.NewString(), Roles: []string{"web", "worker"}, Version: "test",
		Addr: func() string { return n.srv.Listener.Addr().String() }, Secret: testSecret, Sockets: n.sockets,
		OnDrain:    []func(){func() { close(n.drained) }},
		Actions:    []Action{{Name: "disconnect", Apply: func(_ context.Context, user string) int { return n.sockets.DisconnectUserLocal(user) }}},
		RescueJobs: n.rescue.rescue, Work: n.reportWork,
		HeartbeatEvery: 100 * time.Millisecond, ExpireAfter: time.Second, ReapAfter: 2 * time.Second,
	}
	for _, f := range tune {
		f(&opts)
	}
	n.Cluster = New(opts)
	mux.Handle(InternalPrefix+"/", n.Handler())
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { n.Stop(); n.srv.Close() })
	return n
}

// crash stops heartbeats and the HTTP server without deregistering.
func (n *testNode) crash() {
	n.StopHeartbeat()
	n.srv.Close()
}

func nodeRow(t *testing.T, q db.DB, id string) (Node, bool) {
	t.Helper()
	n, err := nodeByID(context.Background(), q, id)
	if err != nil {
		return n, false
	}
	return n, true
}

func TestMembership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("start registers, heartbeats, stop deregisters", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		n := startNode(t, pool)
		row, ok := nodeRow(t, pool, n.NodeID())
		if !ok || row.Addr != n.srv.Listener.Addr().String() || row.Version != "test" || len(row.Roles) != 2 || row.Draining {
			t.Fatalf("registered row: %+v (found %v)", row, ok)
		}
		var first time.Time
		_ = pool.QueryRow(ctx, `SELECT heartbeat_at FROM cluster_nodes WHERE id = $1`, n.NodeID()).Scan(&first)
		testwait.For(t, 2*time.Second, "a heartbeat", func() bool {
			var at time.Time
			_ = pool.QueryRow(ctx, `SELECT heartbeat_at FROM cluster_nodes WHERE id = $1`, n.NodeID()).Scan(&at)
			return at.After(first)
		})
		n.Stop()
		if _, ok := nodeRow(t, pool, n.NodeID()); ok {
			t.Fatal("row still there after Stop")
		}
	})

	t.Run("a reaped node registers again on its next beat", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		n := startNode(t, pool)
		if _, err := pool.Exec(ctx, `DELETE FROM cluster_nodes`); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 2*time.Second, "re-registration", func() bool { _, ok := nodeRow(t, pool, n.NodeID()); return ok })
	})

	t.Run("reap deletes nodes silent for longer than ReapAfter", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		live, dead := startNode(t, pool), startNode(t, pool)
		dead.crash()
		if _, err := pool.Exec(ctx, `UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, dead.NodeID()); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 5*time.Second, "the live node to beat for longer than the expiry", live.mayRescue)
		n, err := live.Reap(ctx)
		if err != nil || n != 1 {
			t.Fatalf("reap: %d %v", n, err)
		}
		if _, ok := nodeRow(t, pool, dead.NodeID()); ok {
			t.Fatal("dead node still registered")
		}
		if _, ok := nodeRow(t, pool, live.NodeID()); !ok {
			t.Fatal("live node reaped")
		}
	})
}

func TestRescueDead(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	live, dead := startNode(t, pool), startNode(t, pool)
	if n, err := live.RescueDead(context.Background()); err != nil || n != 0 || live.rescue.saw(dead.NodeID()) {
		t.Fatalf("rescue while every node beats: %d %v", n, err)
	}
	dead.crash()
	start := time.Now()
	testwait.For(t, 5*time.Second, "heartbeats to hand the dead node to RescueJobs", func() bool { return live.rescue.saw(dead.NodeID()) })
	t.Logf("rescued %s after the crash (expiry %s)", time.Since(start).Round(time.Millisecond), live.opts.ExpireAfter)
	if live.rescue.saw(live.NodeID()) {
		t.Fatal("a live node was handed to RescueJobs")
	}
}

// TestNoRescueRightAfterAnOutage: when the database comes back every node's
// heartbeat looks stale at once; the first node to beat again must not take
// the jobs the others are still running.
func TestNoRescueRightAfterAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	first, other := startNode(t, pool), startNode(t, pool)
	other.crash()                 // stands for a live node whose next beat has not come yet
	first.healthySince.Store(nil) // as after failed beats during the outage
	if _, err := pool.Exec(ctx, `UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if err := first.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := first.Reap(ctx); err != nil || n != 0 {
		t.Fatalf("reap right after the outage: %d %v", n, err)
	}
	if first.rescue.saw(other.NodeID()) {
		t.Fatal("the other node's jobs were taken right after the outage")
	}
}

func TestClusterStartStop(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	startstoptest.Stress(t, func(*testing.T) startstop.Service {
		return New(Options{DB: pool, NodeID: uuid.NewString(), Secret: testSecret, HeartbeatEvery: 10 * time.Millisecond})
	})

	t.Run("StopHeartbeatThenStopDeregisters", func(t *testing.T) {
		t.Parallel()
		c := New(Options{DB: pool, NodeID: uuid.NewString(), Secret: testSecret})
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.StopHeartbeat()
		if _, ok := nodeRow(t, pool, c.NodeID()); !ok {
			t.Fatal("StopHeartbeat deregistered the node")
		}
		c.Stop()
		if _, ok := nodeRow(t, pool, c.NodeID()); ok {
			t.Fatal("Stop after StopHeartbeat left the node registered")
		}
	})
}
