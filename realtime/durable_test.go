package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime/stream"
)

// expectStored reads the next frames and checks they are the stored events
// from..to of name, in order, each once.
func expectStored(t *testing.T, c *wsClient, name string, from, to int64) string {
	t.Helper()
	var epoch string
	for want := from; want <= to; want++ {
		f := c.next(t)
		if f.Stream != name || f.Offset != want || f.Epoch == "" || (epoch != "" && f.Epoch != epoch) {
			t.Fatalf("got %+v, want offset %d of %s", f, want, name)
		}
		epoch = f.Epoch
	}
	return epoch
}

func resumedOf(t *testing.T, f Frame) map[string]resumedStream {
	t.Helper()
	if f.Event != EventResumed {
		t.Fatalf("got %+v, want resumed", f)
	}
	var p struct {
		Streams map[string]resumedStream `json:"streams"`
	}
	if err := json.Unmarshal(f.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.Streams
}

func publishN(t *testing.T, n *node, user string, count int) {
	t.Helper()
	for i := range count {
		if err := n.bus.PublishUser(context.Background(), user, "n", i); err != nil {
			t.Fatal(err)
		}
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b := startNode(t, dbURL, HubOptions{}), startNode(t, dbURL, HubOptions{})

	t.Run("missed events in order on another replica, then resumed, then live", func(t *testing.T) {
		t.Parallel()
		user := uuid.NewString()
		name := stream.UserStream(user)
		first := dial(t, a, user)
		publishN(t, a, user, 3)
		epoch := expectStored(t, first, name, 1, 3)
		_ = first.conn.Close()
		testwait.For(t, 10*time.Second, "first socket gone", func() bool { return a.hub.UserConnectionsLocal(user) == 0 })
		publishN(t, a, user, 3) // 4..6, while nobody listens
		second := dial(t, b, user)
		second.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{%q:{"offset":3,"epoch":%q}}}`, name, epoch))})
		expectStored(t, second, name, 4, 6)
		if r := resumedOf(t, second.next(t))[name]; !r.Recovered || r.Epoch != epoch || r.Offset != 6 {
			t.Fatalf("resumed %+v", r)
		}
		publishN(t, a, user, 1)
		expectStored(t, second, name, 7, 7)
	})

	t.Run("another epoch or a position beyond the head is not recovered", func(t *testing.T) {
		t.Parallel()
		user := uuid.NewString()
		name := stream.UserStream(user)
		publishN(t, a, user, 2)
		c := dial(t, b, user)
		c.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{%q:{"offset":1,"epoch":"gone"}}}`, name))})
		expectStored(t, c, name, 1, 2) // what is retained of the current epoch
		if r := resumedOf(t, c.next(t))[name]; r.Recovered || r.Offset != 2 || r.Epoch == "gone" {
			t.Fatalf("resumed %+v", r)
		}
		other := dial(t, b, user)
		other.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{%q:{"offset":99,"epoch":%q}}}`, name, r0(t, a, name)))})
		if r := resumedOf(t, other.next(t))[name]; r.Recovered || r.Offset != 2 {
			t.Fatalf("resumed beyond the head %+v", r)
		}
	})

	t.Run("a room: resume joins it; room.join with a position", func(t *testing.T) {
		t.Parallel()
		user, room := uuid.NewString(), "resume-"+uuid.NewString()
		name := stream.RoomStream(room)
		for i := range 3 {
			if err := a.bus.PublishRoom(context.Background(), room, "m", i); err != nil {
				t.Fatal(err)
			}
		}
		c := dial(t, b, user)
		c.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{%q:{"offset":1,"epoch":%q}}}`, name, r0(t, a, name)))})
		c.expect(t, EventRoomJoined)
		expectStored(t, c, name, 2, 3)
		if r := resumedOf(t, c.next(t))[name]; !r.Recovered || r.Offset != 3 {
			t.Fatalf("resumed %+v", r)
		}
		d := dial(t, a, user)
		d.send(t, Frame{Event: "room.join", Room: room, Payload: json.RawMessage(`{"offset":0,"epoch":""}`)})
		d.expect(t, EventRoomJoined)
		expectStored(t, d, name, 1, 3)
		if r := resumedOf(t, d.next(t))[name]; !r.Recovered || r.Offset != 3 {
			t.Fatalf("resumed after room.join %+v", r)
		}
	})

	t.Run("another user's stream is refused", func(t *testing.T) {
		t.Parallel()
		c := dial(t, a, uuid.NewString())
		c.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{"user:%s":{"offset":0}}}`, uuid.NewString()))})
		if f := c.expect(t, EventError); !strings.Contains(string(f.Payload), "own user stream") {
			t.Fatalf("error %s", f.Payload)
		}
	})
}

// r0 is a stream's current epoch.
func r0(t *testing.T, n *node, name string) string {
	t.Helper()
	h, err := stream.Read(context.Background(), n.pool, name, 0, stream.Limit{Events: 1})
	if err != nil {
		t.Fatal(err)
	}
	return h.Epoch
}

// A socket gets each offset once and in order whatever order they are
// offered in: past a gap the hub reads the store, and repeats are dropped.
func TestOffersOutOfOrderAreDeliveredInOrderOnce(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{})
	user := uuid.NewString()
	name := stream.UserStream(user)
	c := dial(t, n, user)
	c.send(t, Frame{Event: "resume", Payload: json.RawMessage(`{"streams":{}}`)}) // live from here
	c.expect(t, EventResumed)
	evs := make([]stream.Event, 5)
	for i := range evs {
		evs[i] = stream.Event{Stream: name, Event: "x", Payload: json.RawMessage(itoa(i + 1))}
	}
	// Stored behind the bus's back: no local offer, no doorbell.
	ps, err := stream.Append(context.Background(), n.pool, evs)
	if err != nil {
		t.Fatal(err)
	}
	stored := stream.Stored(evs, ps)
	n.hub.offer([]stream.Event{stored[3], stored[0], stored[0], stored[4], stored[1]})
	expectStored(t, c, name, 1, 5)
	n.hub.offer(stored) // all repeats
	publishN(t, n, user, 1)
	expectStored(t, c, name, 6, 6) // and nothing in between
}

// A replica whose LISTEN connection was down while others published reads
// what it missed once it is back, with no later event to reveal the gap.
func TestListenOutageIsCaughtUp(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	role := "sb_listen_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	// A password, for servers that ask for one (the embedded server does).
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD '"+role+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	a := startNode(t, dbURL, HubOptions{})
	b := startNode(t, dbURL, HubOptions{}, func(o *Options) {
		cfg := o.Bus.Pool.Config().ConnConfig.Copy()
		cfg.User, cfg.Password = role, role
		o.Bus.ListenConfig = cfg
	})
	user, room := uuid.NewString(), "outage-"+uuid.NewString()
	c := dial(t, b, user)
	c.send(t, Frame{Event: "room.join", Room: room})
	c.expect(t, EventRoomJoined)
	publishN(t, a, user, 2)
	expectStored(t, c, stream.UserStream(user), 1, 2)

	// B's LISTEN goes down and cannot come back until the role may log in again.
	if _, err := admin.Exec(ctx, "ALTER ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, b.bus.ListenApplicationName()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "B's LISTEN down", func() bool { return b.bus.Ready(ctx) != nil })
	publishN(t, a, user, 3) // 3..5, doorbells B never hears
	for i := range 2 {
		if err := a.bus.PublishRoom(ctx, room, "m", i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, "ALTER ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for len(got[stream.UserStream(user)])+len(got[stream.RoomStream(room)]) < 5 {
		f := c.next(t)
		got[f.Stream] = append(got[f.Stream], f.Offset)
	}
	if fmt.Sprint(got[stream.UserStream(user)]) != "[3 4 5]" || fmt.Sprint(got[stream.RoomStream(room)]) != "[1 2]" {
		t.Fatalf("after the outage: %v", got)
	}
}

// A reader slower than the publisher gets every stored event, in order,
// at its own pace: its queue stays within SendQueueBytes because stored
// events that do not fit are read from the store later, and it is not
// closed.
// slowReaderHub is a hub with a small send queue for the slow-reader
// tests, whose writes wait minutes for the reader: the publishing loop runs
// before the test reads, and on a loaded machine it took longer than the
// default 10 s, after which a write stuck on the full buffers cut the
// socket (1006) — a reader gone, not the slow one under test.
// slowReaderHub waits long for a client that reads nothing while the test
// publishes: for its writes, and for its pongs (a client answers pings only
// while it reads, and publishing takes minutes on a loaded machine).
var slowReaderHub = HubOptions{SendQueueBytes: 64 << 10, SendBuffer: 4, WriteWait: 3 * time.Minute, PingPeriod: 10 * time.Minute}

func TestSlowReaderLosesNothing(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), slowReaderHub)
	user := uuid.NewString()
	name := stream.UserStream(user)
	conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.WriteJSON(Frame{Event: "resume", Payload: json.RawMessage(`{"streams":{}}`)}) // releases the user stream at once
	testwait.For(t, 10*time.Second, "connection registered", func() bool { return n.hub.hasUser(user) })
	// 300 × 30 KB: far more than the queue and the kernel's buffers hold,
	// published while the client reads nothing.
	payload := json.RawMessage(`"` + strings.Repeat("x", 30000) + `"`)
	const total = 300
	for range total {
		if err := n.bus.PublishUser(context.Background(), user, "big", payload); err != nil {
			t.Fatal(err)
		}
	}
	var last int64
	for last < total {
		var f Frame
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := conn.ReadJSON(&f); err != nil {
			t.Fatalf("read after offset %d: %v", last, err)
		}
		if f.Event == EventResumed {
			continue
		}
		if f.Stream != name || f.Offset != last+1 {
			t.Fatalf("got %s/%d after %d", f.Stream, f.Offset, last)
		}
		last = f.Offset
	}
	if counterValue(n.hub.metrics.slow) != 0 || counterValue(n.hub.metrics.reads) < 2 {
		t.Fatalf("slow consumer closes %v, reads %v: want none, and the backlog read from the store",
			counterValue(n.hub.metrics.slow), counterValue(n.hub.metrics.reads))
	}
}

// A slow-consumer close (3008, from ephemeral frames) loses no stored
// event: the client resumes from the last offset it read.
func TestSlowConsumerResumesWithNothingLost(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), slowReaderHub)
	user := uuid.NewString()
	name := stream.UserStream(user)
	conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.WriteJSON(Frame{Event: "resume", Payload: json.RawMessage(`{"streams":{}}`)})
	testwait.For(t, 10*time.Second, "connection registered", func() bool { return n.hub.hasUser(user) })
	big := json.RawMessage(`"` + strings.Repeat("x", 30000) + `"`)
	stored := 0
	for counterValue(n.hub.metrics.slow) == 0 {
		if stored > 2000 {
			t.Fatal("no slow consumer")
		}
		for range 10 {
			if err := n.bus.PublishUser(context.Background(), user, "typing", big); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.bus.PublishUser(context.Background(), user, "n", stored); err != nil {
			t.Fatal(err)
		}
		stored++
	}
	for range 5 { // stored after the close too
		if err := n.bus.PublishUser(context.Background(), user, "n", stored); err != nil {
			t.Fatal(err)
		}
		stored++
	}
	var last int64
	var epoch string
	for {
		var f Frame
		if err := conn.ReadJSON(&f); err != nil {
			var ce *websocket.CloseError
			if !asCloseError(err, &ce) || ce.Code != CloseSlowConsumer {
				t.Fatalf("read ended with %v after offset %d, want 3008", err, last)
			}
			break
		}
		if f.Stream == "" {
			continue
		}
		if f.Offset != last+1 {
			t.Fatalf("offset %d after %d", f.Offset, last)
		}
		last, epoch = f.Offset, f.Epoch
	}
	testwait.For(t, 10*time.Second, "the closed socket gone", func() bool { return !n.hub.hasUser(user) })
	c := dial(t, n, user)
	c.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{%q:{"offset":%d,"epoch":%q}}}`, name, last, epoch))})
	expectStored(t, c, name, last+1, int64(stored))
	if r := resumedOf(t, c.next(t))[name]; !r.Recovered || r.Offset != int64(stored) {
		t.Fatalf("resumed %+v", r)
	}
}
