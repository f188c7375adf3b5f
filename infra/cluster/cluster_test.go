package cluster

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/dbtest"
	"github.com/switchboard/switchboard/infra/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

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
}

// startNode starts a node on pool; it deregisters when the test ends.
func startNode(t testing.TB, pool *pgxpool.Pool) *testNode {
	t.Helper()
	n := &testNode{sockets: newFakeSockets(), drained: make(chan struct{})}
	mux := http.NewServeMux()
	n.srv = httptest.NewServer(mux)
	n.Cluster = New(Options{
		DB: pool, NodeID: uuid.NewString(), Roles: []string{"web", "worker"}, Version: "test",
		Addr: func() string { return n.srv.Listener.Addr().String() }, Secret: testSecret, Sockets: n.sockets,
		OnDrain:        []func(){func() { close(n.drained) }},
		HeartbeatEvery: 100 * time.Millisecond, ExpireAfter: time.Second, ReapAfter: 2 * time.Second,
	})
	mux.Handle(InternalPrefix+"/", n.Handler())
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { n.Stop(); n.srv.Close() })
	return n
}

// crash stops heartbeats and the HTTP server without deregistering.
func (n *testNode) crash() {
	n.Halt()
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

// insertRunningJob puts a job in River's table as if node had fetched it.
func insertRunningJob(t *testing.T, q db.DB, node string, attempt, maxAttempts int) int64 {
	t.Helper()
	var id int64
	err := q.QueryRow(context.Background(), `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, attempted_by, priority)
		VALUES ('{"run_id":"x"}', 'task_run', $3, 'default', 'running', $2, now(), ARRAY['someone-before', $1], 1)
		RETURNING id`, node, attempt, maxAttempts).Scan(&id)
	if err != nil {
		t.Fatalf("insert job: %v", err)
	}
	return id
}

func jobState(t *testing.T, q db.DB, id int64) (state string, errs int, finalized bool) {
	t.Helper()
	err := q.QueryRow(context.Background(), `SELECT state::text, coalesce(array_length(errors, 1), 0), finalized_at IS NOT NULL FROM river_job WHERE id = $1`, id).
		Scan(&state, &errs, &finalized)
	if err != nil {
		t.Fatal(err)
	}
	return state, errs, finalized
}

func TestRescueDead(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	live, dead := startNode(t, pool), startNode(t, pool)
	liveJob := insertRunningJob(t, pool, live.NodeID(), 1, 3)
	retry := insertRunningJob(t, pool, dead.NodeID(), 1, 3)
	spent := insertRunningJob(t, pool, dead.NodeID(), 3, 3)

	if jobs, err := live.RescueDead(context.Background()); err != nil || len(jobs) != 0 {
		t.Fatalf("rescue while every node beats: %v %v", jobs, err)
	}
	dead.crash()
	start := time.Now()
	testwait.For(t, 5*time.Second, "the dead node's jobs to be rescued by heartbeats", func() bool {
		s, _, _ := jobState(t, pool, retry)
		return s != "running"
	})
	t.Logf("rescued %s after the crash (expiry %s)", time.Since(start).Round(time.Millisecond), live.opts.ExpireAfter)
	if s, errs, fin := jobState(t, pool, retry); s != "available" || errs != 1 || fin {
		t.Fatalf("job with attempts left: %s, %d errors, finalized %v", s, errs, fin)
	}
	if s, _, fin := jobState(t, pool, spent); s != "discarded" || !fin {
		t.Fatalf("job with attempts spent: %s, finalized %v", s, fin)
	}
	if s, _, _ := jobState(t, pool, liveJob); s != "running" {
		t.Fatalf("live node's job: %s", s)
	}
	var msg string
	_ = pool.QueryRow(context.Background(), `SELECT errors[1]->>'error' FROM river_job WHERE id = $1`, retry).Scan(&msg)
	if msg == "" {
		t.Fatal("no error recorded on the rescued job")
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
	job := insertRunningJob(t, pool, other.NodeID(), 1, 3)
	other.crash()               // stands for a live node whose next beat has not come yet
	first.healthySince.Store(0) // as after failed beats during the outage
	if _, err := pool.Exec(ctx, `UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if err := first.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := first.Reap(ctx); err != nil || n != 0 {
		t.Fatalf("reap right after the outage: %d %v", n, err)
	}
	if s, _, _ := jobState(t, pool, job); s != "running" {
		t.Fatalf("the other node's job was taken right after the outage: %s", s)
	}
}

func TestRescuedHookRunsInTheTransaction(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	dead := startNode(t, pool)
	job := insertRunningJob(t, pool, dead.NodeID(), 1, 3)
	dead.crash()
	if _, err := pool.Exec(context.Background(), `UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	var got []RescuedJob
	c := New(Options{DB: pool, NodeID: uuid.NewString(), Rescued: func(ctx context.Context, tx pgx.Tx, jobs []RescuedJob) error {
		got = jobs
		return errors.New("recording failed")
	}})
	if _, err := c.RescueDead(context.Background()); err == nil {
		t.Fatal("hook error not returned")
	}
	if s, _, _ := jobState(t, pool, job); s != "running" || len(got) != 1 || got[0].ID != job || got[0].DeadNode != dead.NodeID() {
		t.Fatalf("after a failing hook: state %s, hook saw %+v", s, got)
	}
}

func TestSchedulerBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	if s, err := schedulerBacklog(ctx, tx); err != nil || s.DueTasks != 0 || s.OldestDueAgeMS != 0 {
		t.Fatalf("no tasks: %+v %v", s, err)
	}
	_, err := tx.Exec(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash) VALUES ('backlog@example.com', 'x') RETURNING id)
		INSERT INTO tasks (owner_id, name, schedule, action, signing_secret, active, next_run_at)
		SELECT u.id, n.name, '@every 1s', '{"type":"publish","event":"x"}', 'whsec_x', n.active, now() + n.due
		FROM u, (VALUES ('late', true, interval '-5 seconds'), ('later', true, interval '-1 second'),
			('future', true, interval '1 hour'), ('paused', false, interval '-1 hour')) AS n(name, active, due)`)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedulerBacklog(ctx, tx)
	if err != nil || s.DueTasks != 2 || s.OldestDueAgeMS < 5000 || s.OldestDueAgeMS > 60000 {
		t.Fatalf("backlog: %+v %v", s, err)
	}
}
