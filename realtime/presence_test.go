package realtime

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/startstoptest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// noDeadNodes is a cluster in which every node lives.
type noDeadNodes struct{}

func (noDeadNodes) DeadNodes(context.Context) ([]string, time.Duration, error) {
	return nil, time.Second, nil
}

func TestPresenceStartStop(t *testing.T) {
	t.Parallel()
	pool, err := db.Connect(context.Background(), dbtest.NewDatabaseURL(t), db.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	startstoptest.Stress(t, func(*testing.T) startstop.Service {
		return New(Options{Bus: BusOptions{Pool: pool}, Hub: &HubOptions{}, Presence: &PresenceOptions{Nodes: noDeadNodes{}}}).Presence
	})
}

// startTrackedNode starts a node whose presence tracker (popts) runs
// too, stopped with the test.
func startTrackedNode(t *testing.T, dbURL string, popts PresenceOptions) *node {
	t.Helper()
	n := startNode(t, dbURL, HubOptions{}, func(o *Options) { o.Presence = &popts })
	if err := n.presence.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.presence.Stop)
	return n
}

// presenceFrames reads c's frames until want presence frames arrived.
func presenceFrames(t *testing.T, c *wsClient, want int) []string {
	t.Helper()
	var seen []string
	for len(seen) < want {
		f := c.next(t)
		if f.Event != EventPresenceJoin && f.Event != EventPresenceLeave {
			continue
		}
		var p struct {
			UserID string `json:"user_id"`
		}
		_ = json.Unmarshal(f.Payload, &p)
		seen = append(seen, f.Event+" "+p.UserID)
	}
	return seen
}

// TestPresenceSweepAnnouncesOnce: two survivors end a dead node's presence
// at the same moment; each leave is announced once, and none for a user
// another node still holds.
func TestPresenceSweepAnnouncesOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b := startTrackedNode(t, dbURL, PresenceOptions{}), startTrackedNode(t, dbURL, PresenceOptions{})
	pa, pb := a.presence, b.presence
	watcherID := uuid.NewString()
	w := dial(t, a, watcherID)
	w.send(t, Frame{Event: "room.join", Room: "lobby"})
	w.expect(t, EventRoomJoined)
	if got := presenceFrames(t, w, 1); got[0] != EventPresenceJoin+" "+watcherID {
		t.Fatalf("the watcher's own join: %v", got)
	}

	dead, alice, bob := uuid.NewString(), uuid.NewString(), uuid.NewString()
	_, err := a.pool.Exec(context.Background(), `
		INSERT INTO presence (room, user_id, node_id, connections)
		VALUES ('lobby', $2, $1, 1), ('lobby', $3, $1, 2), ('other', $2, $1, 1)`, dead, alice, bob)
	if err != nil {
		t.Fatal(err)
	}
	bobElsewhere := dial(t, b, bob)
	bobElsewhere.send(t, Frame{Event: "room.join", Room: "lobby"})
	bobElsewhere.expect(t, EventRoomJoined)
	testwait.For(t, 10*time.Second, "bob's row on the live node", func() bool {
		var n int
		_ = a.pool.QueryRow(context.Background(), `SELECT count(*) FROM presence WHERE user_id = $1`, bob).Scan(&n)
		return n == 2
	})

	var wg sync.WaitGroup
	leaves := make([]int, 2)
	for i, p := range []*PresenceTracker{pa, pb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := p.Sweep(context.Background(), []string{dead})
			if err != nil {
				t.Error(err)
			}
			leaves[i] = n
		}()
	}
	wg.Wait()
	if leaves[0]+leaves[1] != 2 { // alice in lobby and in other
		t.Fatalf("leaves announced: %v, want 2 in all", leaves)
	}
	// The watcher's next presence frames: alice's leave, then a sentinel's
	// join (NOTIFYs arrive in commit order, so nothing else came between).
	sentinel := uuid.NewString()
	s := dial(t, b, sentinel)
	s.send(t, Frame{Event: "room.join", Room: "lobby"})
	if got := presenceFrames(t, w, 2); got[0] != EventPresenceLeave+" "+alice || got[1] != EventPresenceJoin+" "+sentinel {
		t.Fatalf("after the sweep the watcher saw %v", got)
	}
	p, err := pa.RoomPresence(context.Background(), "lobby") // degraded: no cluster_nodes rows here
	if err != nil || len(p.Users) != 3 || p.Users[0].Connections != 1 {
		t.Fatalf("presence: %+v %v", p, err)
	}
}

// TestPresenceResyncAfterASweep: a node judged dead while it only stalled
// finds its rows deleted; it writes them again and announces the join.
func TestPresenceResyncAfterASweep(t *testing.T) {
	t.Parallel()
	n := startTrackedNode(t, dbtest.NewDatabaseURL(t), PresenceOptions{ResyncEvery: 20 * time.Millisecond})
	p := n.presence
	alice := uuid.NewString()
	c := dial(t, n, alice)
	c.send(t, Frame{Event: "room.join", Room: "lobby"})
	c.expect(t, EventRoomJoined)
	if got := presenceFrames(t, c, 1); got[0] != EventPresenceJoin+" "+alice {
		t.Fatalf("join: %v", got)
	}
	// A survivor sweeps this node as if it were dead.
	if left, err := p.Sweep(context.Background(), []string{n.bus.NodeID()}); err != nil || left != 1 {
		t.Fatalf("sweep: %d %v", left, err)
	}
	if got := presenceFrames(t, c, 2); got[0] != EventPresenceLeave+" "+alice || got[1] != EventPresenceJoin+" "+alice {
		t.Fatalf("after the sweep: %v, want the leave then the join again", got)
	}
	pr, err := p.RoomPresence(context.Background(), "lobby")
	if err != nil || len(pr.Users) != 1 || pr.Users[0].UserID != alice {
		t.Fatalf("presence: %+v %v", pr, err)
	}
}

// TestPresenceFollowsTheHubsSockets: the hub New builds tells its tracker
// of every join and leave as it happens: with a resync an hour away, a
// socket's room.join is announced, and so is its room.leave.
func TestPresenceFollowsTheHubsSockets(t *testing.T) {
	t.Parallel()
	n := startTrackedNode(t, dbtest.NewDatabaseURL(t), PresenceOptions{ResyncEvery: time.Hour})
	watcher, alice := uuid.NewString(), uuid.NewString()
	w := dial(t, n, watcher)
	w.send(t, Frame{Event: "room.join", Room: "lobby"})
	w.expect(t, EventRoomJoined)
	if got := presenceFrames(t, w, 1); got[0] != EventPresenceJoin+" "+watcher {
		t.Fatalf("the watcher's own join: %v", got)
	}
	a := dial(t, n, alice)
	a.send(t, Frame{Event: "room.join", Room: "lobby"})
	a.expect(t, EventRoomJoined)
	a.send(t, Frame{Event: "room.leave", Room: "lobby"})
	if got := presenceFrames(t, w, 2); got[0] != EventPresenceJoin+" "+alice || got[1] != EventPresenceLeave+" "+alice {
		t.Fatalf("alice's join and leave: %v", got)
	}
}
