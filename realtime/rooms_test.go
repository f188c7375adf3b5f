package realtime

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime/stream"
)

// gatedRooms is the room store whose Denied, when asked about room gate,
// waits until open is closed: it holds this replica's LISTEN loop inside
// a notice, so that what arrives meanwhile waits behind it — the state of
// a replica that has not yet applied an eviction.
type gatedRooms struct {
	Rooms
	gate    string
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (g *gatedRooms) Denied(ctx context.Context, ask map[string][]string) (map[string][]string, error) {
	if _, ok := ask[g.gate]; ok {
		g.once.Do(func() { close(g.entered) })
		<-g.open
	}
	return g.Rooms.Denied(ctx, ask)
}

type roomsBundle struct {
	node    *node
	rooms   *gatedRooms
	store   Rooms
	owner   string
	member  *wsClient
	memberU string
}

// setupRooms: one replica; "vault" is members-only with member in it, and
// member's socket has joined vault, "gate" (open) and "lobby". The LISTEN
// loop is then held inside the notice of gate becoming members-only.
func setupRooms(t *testing.T) *roomsBundle {
	t.Helper()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	pool, err := db.Connect(ctx, dbURL, db.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := Rooms{DB: pool}
	owner, member := dbtest.User(t, pool, nil).ID, dbtest.User(t, pool, nil).ID
	for _, r := range []struct{ name, vis string }{{"vault", VisibilityMembers}, {"gate", VisibilityOpen}} {
		if _, err := store.Create(ctx, r.name, owner, r.vis, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := store.AddMember(ctx, r.name, member); err != nil {
			t.Fatal(err)
		}
	}
	g := &gatedRooms{Rooms: store, gate: "gate", entered: make(chan struct{}), open: make(chan struct{})}
	n := startNode(t, dbURL, HubOptions{Rooms: g})
	t.Cleanup(func() { closeOnce(g.open) }) // before the node stops
	c := dial(t, n, member)
	for _, room := range []string{"vault", "gate", "lobby"} {
		c.send(t, Frame{Event: "room.join", Room: room})
		c.expect(t, EventRoomJoined)
	}
	if _, err := store.SetVisibility(ctx, "gate", VisibilityMembers); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	return &roomsBundle{node: n, rooms: g, store: store, owner: owner, member: c, memberU: member}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (b *roomsBundle) publish(t *testing.T, ev Event) {
	t.Helper()
	if err := b.node.bus.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

// A post this replica appends after a removal it has not applied yet is not
// delivered to the removed member's socket: the replica's own room events
// wait for their doorbell, behind the eviction notice.
func TestOwnRoomPostWaitsForEvictionsBeforeIt(t *testing.T) {
	t.Parallel()
	b := setupRooms(t)
	if err := b.store.RemoveMember(context.Background(), "vault", b.memberU); err != nil {
		t.Fatal(err)
	}
	b.publish(t, Event{Event: "secret", Room: "vault", From: b.owner, Payload: json.RawMessage(`1`)})
	b.publish(t, Event{Event: "marker", To: b.memberU, From: b.owner}) // a user event: delivered at once
	if f := b.member.next(t); f.Event != "marker" {
		t.Fatalf("before its eviction was applied the socket got %+v", f)
	}
	closeOnce(b.rooms.open)
	if f := b.member.expect(t, EventRoomRemoved); f.Room != "vault" {
		t.Fatalf("room.removed of %q", f.Room)
	}
	b.publish(t, Event{Event: "marker", Room: "lobby", From: b.owner})
	if f := b.member.next(t); f.Event != "marker" || f.Room != "lobby" {
		t.Fatalf("after the eviction the socket got %+v", f)
	}
}

// A read of a room's stream (a gap, a join, a resume) that holds an event
// committed after a removal this replica has not applied yet evicts the
// socket instead of delivering it.
func TestReadOfRoomStreamChecksAccessFirst(t *testing.T) {
	t.Parallel()
	b := setupRooms(t)
	if err := b.store.RemoveMember(context.Background(), "vault", b.memberU); err != nil {
		t.Fatal(err)
	}
	b.publish(t, Event{Event: "secret", Room: "vault", From: b.owner})
	b.node.hub.requestRead(stream.RoomStream("vault"), 0) // as after a gap
	f := b.member.next(t)
	if f.Event != EventRoomRemoved || f.Room != "vault" {
		t.Fatalf("the read delivered %+v", f)
	}
	if n := b.node.hub.RoomMembersLocal("vault"); len(n) != 0 {
		t.Fatalf("still in the room: %v", n)
	}
	closeOnce(b.rooms.open)
	b.publish(t, Event{Event: "marker", Room: "lobby", From: b.owner})
	if f := b.member.next(t); f.Event != "marker" || f.Room != "lobby" {
		t.Fatalf("after the eviction the socket got %+v", f)
	}
}

// An eviction notice sent while this replica's LISTEN connection was down
// is never received: after reconnecting, the replica checks its sockets'
// rooms again before it delivers anything.
func TestMissedEvictionIsAppliedAfterListenReconnects(t *testing.T) {
	t.Parallel()
	b := setupRooms(t)
	ctx := context.Background()
	app := b.node.bus.ListenApplicationName()
	if _, err := b.store.DB.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "LISTEN backend gone", func() bool {
		var n int
		_ = b.store.DB.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		return n == 0
	})
	if err := b.store.RemoveMember(ctx, "vault", b.memberU); err != nil { // nobody here hears it
		t.Fatal(err)
	}
	closeOnce(b.rooms.open)
	b.publish(t, Event{Event: "marker", Room: "lobby", From: b.owner})
	// The socket is told it was removed. The marker (another room) may come
	// first when LISTEN was back before the removal committed: the notice
	// is then heard, after a catch-up read that already carried the marker.
	got := map[string]bool{}
	for len(got) < 2 {
		f := b.member.next(t)
		switch {
		case f.Event == EventRoomRemoved && f.Room == "vault", f.Event == "marker" && f.Room == "lobby":
			got[f.Event] = true
		default:
			t.Fatalf("after the reconnect the socket got %+v", f)
		}
	}
}

// slowCheck is the room store whose first CanUseRoom answers only once
// release is closed: a join checked before an eviction, indexed after it.
type slowCheck struct {
	Rooms
	checked chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *slowCheck) CanUseRoom(ctx context.Context, room, user string) (bool, error) {
	ok, err := s.Rooms.CanUseRoom(ctx, room, user)
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.checked)
		<-s.release
	}
	return ok, err
}

// A join whose access was checked before an eviction the hub applied
// before indexing it is checked again: the socket does not stay in the
// room.
func TestJoinRacingAnEvictionIsCheckedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	pool, err := db.Connect(ctx, dbURL, db.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := Rooms{DB: pool}
	owner, member := dbtest.User(t, pool, nil).ID, dbtest.User(t, pool, nil).ID
	if _, err := store.Create(ctx, "vault", owner, VisibilityMembers, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddMember(ctx, "vault", member); err != nil {
		t.Fatal(err)
	}
	sc := &slowCheck{Rooms: store, checked: make(chan struct{}), release: make(chan struct{})}
	n := startNode(t, dbURL, HubOptions{Rooms: sc})
	t.Cleanup(func() { closeOnce(sc.release) })
	c := dial(t, n, member)
	c.send(t, Frame{Event: "room.join", Room: "vault"})
	<-sc.checked // allowed, not yet indexed
	if err := store.RemoveMember(ctx, "vault", member); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "eviction applied", func() bool { return n.hub.evictions.Load() > 0 })
	closeOnce(sc.release)
	c.expect(t, EventRoomJoined)
	if f := c.expect(t, EventRoomRemoved); f.Room != "vault" {
		t.Fatalf("room.removed of %q", f.Room)
	}
	if m := n.hub.RoomMembersLocal("vault"); len(m) != 0 {
		t.Fatalf("still in the room: %v", m)
	}
}
