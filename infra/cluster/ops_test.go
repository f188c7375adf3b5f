package cluster

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// threeNodes starts three nodes on one database.
func threeNodes(t *testing.T, tune ...func(*Options)) []*testNode {
	t.Helper()
	pool := dbtest.NewPool(t)
	return []*testNode{startNode(t, pool, tune...), startNode(t, pool, tune...), startNode(t, pool, tune...)}
}

// patient gives a node all the time a loaded machine may need to answer
// another's status call: reachability is then what is tested, not speed.
func patient(o *Options) { o.StatusBudget = time.Minute }

func TestStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("every node reachable from any node", func(t *testing.T) {
		t.Parallel()
		began := time.Now()
		nodes := threeNodes(t, patient)
		nodes[1].sockets.connect("u1")
		nodes[1].sockets.connect("u2")
		for _, n := range nodes { // the job queue's figures, as its owner reports them
			n.setWork(Work{Queue: QueueCounts{Running: 1}, RunningByNode: map[string]int{nodes[2].NodeID(): 1}, Scheduler: SchedulerStatus{DueTasks: 3},
				Backlog: Backlog{Demand: 5, DueTasks: 3, RunningJobs: 1, AvailableJobs: 1}})
		}
		for _, from := range nodes {
			st, err := from.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Nodes) != 3 || st.Degraded || st.Queue.Running != 1 || st.Scheduler.DueTasks != 3 ||
				st.Backlog != (Backlog{Demand: 5, DueTasks: 3, RunningJobs: 1, AvailableJobs: 1}) {
				t.Fatalf("status from %s: %+v", from.NodeID(), st)
			}
			for _, ns := range st.Nodes {
				// A node beats when it starts, so its last beat is younger
				// than the test.
				if !ns.Reachable || ns.Version != "test" || ns.Addr == "" || ns.HeartbeatAgeMS < 0 || ns.HeartbeatAgeMS > time.Since(began).Milliseconds() {
					t.Fatalf("node %+v", ns)
				}
				switch ns.ID {
				case nodes[1].NodeID():
					if ns.WSConnections != 2 {
						t.Fatalf("ws_connections of node 1: %d", ns.WSConnections)
					}
				case nodes[2].NodeID():
					if ns.JobsRunning != 1 {
						t.Fatalf("jobs_running of node 2: %d", ns.JobsRunning)
					}
				}
			}
		}
		if got := nodes[0].CallsSent(); got != 2 {
			t.Fatalf("node 0 made %d calls for one status, want 2 (its own is in-process)", got)
		}
	})

	t.Run("a stopped node is unreachable and the answer degraded", func(t *testing.T) {
		t.Parallel()
		nodes := threeNodes(t, patient)
		nodes[2].crash()
		start := time.Now()
		st, err := nodes[0].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Degraded || len(st.Nodes) != 3 {
			t.Fatalf("status: %+v", st)
		}
		for _, ns := range st.Nodes {
			if ns.Reachable == (ns.ID == nodes[2].NodeID()) {
				t.Fatalf("node %s reachable=%v", ns.ID, ns.Reachable)
			}
			if !ns.Reachable && (ns.Error == "" || ns.WSConnections != 0) {
				t.Fatalf("unreachable node: %+v", ns)
			}
		}
		t.Logf("answered in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("a node that accepts but never answers costs the budget, no more", func(t *testing.T) {
		t.Parallel()
		// No timeout but the budget: without it, the call to the ghost
		// would never end.
		nodes := threeNodes(t, func(o *Options) {
			o.StatusBudget = 300 * time.Millisecond
			o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		})
		hang := blackhole(t)
		ghost := Node{ID: uuid.NewString(), Name: "ghost", Addr: hang, Roles: []string{"worker"}, Version: "test", StartedAt: time.Now()}
		if err := nodeUpsert(ctx, nodes[0].opts.DB, ghost); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		st, err := nodes[0].Status(ctx)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Degraded || len(st.Nodes) != 4 {
			t.Fatalf("status took %s: %+v", took, st)
		}
		for _, ns := range st.Nodes {
			if ns.ID == ghost.ID && (ns.Reachable || ns.Name != "ghost") {
				t.Fatalf("ghost: %+v", ns)
			}
		}
		t.Logf("answered in %s with a hanging node (budget 300ms)", took.Round(time.Millisecond))
	})
}

// blackhole is an address that accepts connections and never answers.
func blackhole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }()
		}
	}()
	return l.Addr().String()
}

func TestFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("closes the user's sockets on every node", func(t *testing.T) {
		t.Parallel()
		nodes := threeNodes(t)
		for _, n := range nodes {
			n.sockets.connect("alice")
			n.sockets.connect("bob")
		}
		nodes[2].sockets.connect("alice")
		res, err := nodes[1].FanOut(ctx, "disconnect", "alice")
		if err != nil {
			t.Fatal(err)
		}
		if res.Affected != 4 || len(res.Acked) != 3 || len(res.Failed) != 0 {
			t.Fatalf("result: %+v", res)
		}
		for i, n := range nodes {
			if n.sockets.LocalConnections() != 1 {
				t.Fatalf("node %d has %d sockets, want bob's only", i, n.sockets.LocalConnections())
			}
		}
	})

	t.Run("a node down is reported failed", func(t *testing.T) {
		t.Parallel()
		nodes := threeNodes(t)
		for _, n := range nodes {
			n.sockets.connect("alice")
		}
		nodes[0].crash()
		res, err := nodes[1].FanOut(ctx, "disconnect", "alice")
		if err != nil {
			t.Fatal(err)
		}
		if res.Affected != 2 || !slices.Equal(res.Failed, []string{nodes[0].NodeID()}) || len(res.Acked) != 2 {
			t.Fatalf("result: %+v", res)
		}
	})

	t.Run("an action no node registered is refused", func(t *testing.T) {
		t.Parallel()
		nodes := threeNodes(t)
		if _, err := nodes[0].FanOut(ctx, "reboot", "x"); !errors.Is(err, ErrUnknownAction) {
			t.Fatalf("unknown action: %v", err)
		}
		if nodes[0].CallsSent() != 0 {
			t.Fatal("an unknown action was sent to other nodes")
		}
	})
}

func TestDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a remote node drains", func(t *testing.T) {
		t.Parallel()
		nodes := threeNodes(t)
		if err := nodes[0].Drain(ctx, nodes[1].NodeID()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-nodes[1].drained:
		default:
			t.Fatal("drain hooks did not run before the ack")
		}
		if !nodes[1].sockets.isDrained() || nodes[1].ReadyCheck(ctx) == nil || !nodes[1].Draining() {
			t.Fatal("drained node: sockets not drained or still ready")
		}
		if nodes[0].Draining() || nodes[2].Draining() || nodes[0].ReadyCheck(ctx) != nil {
			t.Fatal("other nodes drained too")
		}
		if err := nodes[2].Drain(ctx, nodes[1].NodeID()); err != nil {
			t.Fatalf("draining twice: %v", err)
		}
		st, _ := nodes[2].Status(ctx)
		for _, ns := range st.Nodes {
			if ns.Draining != (ns.ID == nodes[1].NodeID()) {
				t.Fatalf("status: %+v", ns)
			}
		}
		if row, _ := nodeRow(t, nodes[0].opts.DB, nodes[1].NodeID()); !row.Draining {
			t.Fatal("draining not recorded in cluster_nodes")
		}
	})

	t.Run("its own node, in-process", func(t *testing.T) {
		t.Parallel()
		nodes := threeNodes(t)
		if err := nodes[0].Drain(ctx, nodes[0].NodeID()); err != nil || !nodes[0].Draining() || nodes[0].CallsSent() != 0 {
			t.Fatalf("self drain: %v, draining %v, calls %d", err, nodes[0].Draining(), nodes[0].CallsSent())
		}
	})

	t.Run("unknown node", func(t *testing.T) {
		t.Parallel()
		nodes := threeNodes(t)
		if err := nodes[0].Drain(ctx, uuid.NewString()); !errors.Is(err, ErrUnknownNode) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("a node that does not answer", func(t *testing.T) {
		t.Parallel()
		nodes := threeNodes(t, patient)
		nodes[2].crash()
		var ce *CallError
		if err := nodes[0].Drain(ctx, nodes[2].NodeID()); !errors.As(err, &ce) || ce.Node != nodes[2].NodeID() {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestSignedCallsAreNotFannedOut sends a signed request straight to each
// internal route of one node: it is applied there and no other node hears
// of it.
func TestSignedCallsAreNotFannedOut(t *testing.T) {
	t.Parallel()
	nodes := threeNodes(t)
	for _, n := range nodes {
		n.sockets.connect("alice", "lobby")
	}
	target := nodes[0]
	self := target.self()
	client := NewHTTPClient()
	for _, path := range []struct{ method, path string }{
		{http.MethodGet, nodePath(self, "/status")},
		{http.MethodPost, nodePath(self, "/actions/disconnect?arg=alice")},
		{http.MethodPost, nodePath(self, "/drain")},
	} {
		req, _ := http.NewRequest(path.method, target.srv.URL+path.path, nil)
		Sign(req, testSecret, "test", nil, time.Now())
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d", path.method, path.path, res.StatusCode)
		}
	}
	if got := target.CallsReceived(); got != 3 {
		t.Fatalf("target served %d calls, want 3", got)
	}
	for i, n := range nodes {
		if n.CallsSent() != 0 || (i > 0 && n.CallsReceived() != 0) {
			t.Fatalf("node %d: sent %d, received %d: a signed call was fanned out", i, n.CallsSent(), n.CallsReceived())
		}
	}
	if target.sockets.LocalConnections() != 0 || nodes[1].sockets.LocalConnections() != 1 || !target.Draining() || nodes[1].Draining() {
		t.Fatal("the signed calls were not applied on exactly their node")
	}
	// Inside a signed call, the fan-out operations stay local too.
	ictx := context.WithValue(context.Background(), internalKey{}, true)
	if st, _ := target.Status(ictx); !st.Degraded || target.CallsSent() != 0 {
		t.Fatalf("status inside a signed call asked other nodes: sent %d", target.CallsSent())
	}
	if err := target.Drain(ictx, nodes[1].NodeID()); err == nil || nodes[1].Draining() {
		t.Fatal("drain inside a signed call was forwarded")
	}
}

func TestInternalRoutes(t *testing.T) {
	t.Parallel()
	nodes := threeNodes(t)
	n := nodes[0]
	do := func(method, path string, sign func(*http.Request)) int {
		req, _ := http.NewRequest(method, n.srv.URL+path, nil)
		if sign != nil {
			sign(req)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	drain := nodePath(n.self(), "/drain")
	for _, tc := range []struct {
		name string
		sign func(*http.Request)
		want int
	}{
		{"unsigned", nil, http.StatusUnauthorized},
		{"header set by hand", func(r *http.Request) {
			r.Header.Set(HeaderTimestamp, "1")
			r.Header.Set(HeaderSignature, "v1=00")
		}, http.StatusUnauthorized},
		{"wrong secret", func(r *http.Request) { Sign(r, []byte("not-the-cluster-secret"), "", nil, time.Now()) }, http.StatusUnauthorized},
		{"replayed old timestamp", func(r *http.Request) { Sign(r, testSecret, "", nil, time.Now().Add(-time.Minute)) }, http.StatusUnauthorized},
		{"signed over another body", func(r *http.Request) { Sign(r, testSecret, "", []byte(`{"x":1}`), time.Now()) }, http.StatusUnauthorized},
	} {
		if got := do(http.MethodPost, drain, tc.sign); got != tc.want {
			t.Fatalf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if n.Draining() {
		t.Fatal("a refused request drained the node")
	}
	other := nodePath(nodes[1].self(), "/drain")
	if got := do(http.MethodPost, other, func(r *http.Request) { Sign(r, testSecret, "", nil, time.Now()) }); got != http.StatusMisdirectedRequest {
		t.Fatalf("call for another node: %d", got)
	}
	if n.Draining() || nodes[1].Draining() {
		t.Fatal("a misdirected call drained a node")
	}
}
