package realtime

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// rateLimited reads the error event of a refused frame.
func rateLimited(t *testing.T, f Frame) string {
	t.Helper()
	var p struct {
		Message      string `json:"message"`
		Code         string `json:"code"`
		RetryAfterMS int64  `json:"retry_after_ms"`
	}
	if f.Event != EventError || json.Unmarshal(f.Payload, &p) != nil || p.Code != "rate_limited" || p.RetryAfterMS <= 0 {
		t.Fatalf("want a rate_limited error event, got %+v", f)
	}
	return p.Message
}

func TestFrameLimits(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)

	t.Run("per connection: error events, then close 4029", func(t *testing.T) {
		t.Parallel()
		// A rate so low that no token comes back while the test runs.
		n := startNode(t, dbURL, HubOptions{Limits: FrameLimits{ConnRate: 0.001, ConnBurst: 3, Strikes: 4}})
		c := dial(t, n, uuid.NewString())
		for range 3 {
			c.send(t, Frame{Event: "room.join", Room: "r"})
			c.expect(t, EventRoomJoined)
		}
		c.send(t, Frame{Event: "room.join", Room: "r"})
		if msg := rateLimited(t, c.next(t)); !strings.Contains(msg, "per-connection") {
			t.Fatalf("message %q does not name the limit", msg)
		}
		// Dropped without an answer, until the fourth in a row closes.
		for range 3 {
			_ = c.conn.WriteMessage(websocket.TextMessage, []byte(`{"event":"room.join","room":"r"}`))
		}
		if code := c.closeCode(t); code != CloseRateLimited {
			t.Fatalf("close code %d, want %d", code, CloseRateLimited)
		}
		if got := counterValue(n.hub.limits.metrics.limited.WithLabelValues("connection")); got != 4 {
			t.Fatalf("limited{connection} = %v, want 4", got)
		}
		if got := counterValue(n.hub.limits.metrics.limitCloses); got != 1 {
			t.Fatalf("rate limit closes = %v, want 1", got)
		}
	})

	t.Run("per user: shared by the user's sockets on a node, not by others", func(t *testing.T) {
		t.Parallel()
		n := startNode(t, dbURL, HubOptions{Limits: FrameLimits{UserRate: 0.001, UserBurst: 4, Strikes: 100}})
		user := uuid.NewString()
		a, b, other := dial(t, n, user), dial(t, n, user), dial(t, n, uuid.NewString())
		for range 3 {
			a.send(t, Frame{Event: "room.join", Room: "r"})
			a.expect(t, EventRoomJoined)
		}
		b.send(t, Frame{Event: "room.join", Room: "r"})
		b.expect(t, EventRoomJoined)
		b.send(t, Frame{Event: "room.join", Room: "r"})
		if msg := rateLimited(t, b.next(t)); !strings.Contains(msg, "per-user frame") {
			t.Fatalf("message %q does not name the limit", msg)
		}
		a.send(t, Frame{Event: "room.join", Room: "r"})
		rateLimited(t, a.next(t))
		// Reconnecting does not bring a fresh budget.
		_ = a.conn.Close()
		_ = b.conn.Close()
		testwait.For(t, 10*time.Second, "sockets gone", func() bool { return !n.hub.hasUser(user) })
		c := dial(t, n, user)
		c.send(t, Frame{Event: "room.join", Room: "r"})
		rateLimited(t, c.next(t))
		// Another user has a budget of its own.
		other.send(t, Frame{Event: "room.join", Room: "r"})
		other.expect(t, EventRoomJoined)
	})

	t.Run("per user: each replica counts its own sockets", func(t *testing.T) {
		t.Parallel()
		limits := FrameLimits{UserRate: 0.001, UserBurst: 2, Strikes: 100}
		a, b := startNode(t, dbURL, HubOptions{Limits: limits}), startNode(t, dbURL, HubOptions{Limits: limits})
		user := uuid.NewString()
		onA, onA2, onB := dial(t, a, user), dial(t, a, user), dial(t, b, user)
		for _, c := range []*wsClient{onA, onA2, onB, onB} {
			c.send(t, Frame{Event: "room.join", Room: "r"})
			c.expect(t, EventRoomJoined)
		}
		// A's two sockets share A's budget; B's is B's own (documented).
		for _, c := range []*wsClient{onA, onA2, onB} {
			c.send(t, Frame{Event: "room.join", Room: "r"})
			rateLimited(t, c.next(t))
		}
	})

	t.Run("per user: bytes", func(t *testing.T) {
		t.Parallel()
		// 1000 bytes/s: a burst of 4000 bytes.
		n := startNode(t, dbURL, HubOptions{MaxFrameBytes: 2048, Limits: FrameLimits{UserBytes: 1000, Strikes: 100}})
		c := dial(t, n, uuid.NewString())
		frame := `{"event":"room.join","room":"r","payload":"` + strings.Repeat("x", 1500) + `"}`
		for range 2 {
			c.send(t, frame)
			c.expect(t, EventRoomJoined)
		}
		c.send(t, frame)
		if msg := rateLimited(t, c.next(t)); !strings.Contains(msg, "byte") {
			t.Fatalf("message %q does not name the limit", msg)
		}
		c.send(t, Frame{Event: "room.join", Room: "small"})
		c.expect(t, EventRoomJoined)
	})

	t.Run("connections per user", func(t *testing.T) {
		t.Parallel()
		n := startNode(t, dbURL, HubOptions{Limits: FrameLimits{MaxConnsPerUser: 2}})
		user := uuid.NewString()
		first, _ := dial(t, n, user), dial(t, n, user)
		if _, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil); err == nil {
			t.Fatal("a third socket was accepted")
		}
		if got := counterValue(n.hub.limits.metrics.connsRefused); got != 1 {
			t.Fatalf("connections refused = %v, want 1", got)
		}
		dial(t, n, uuid.NewString()) // others are not affected
		_ = first.conn.Close()
		testwait.For(t, 10*time.Second, "a socket is free again", func() bool {
			conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
			if err == nil {
				t.Cleanup(func() { _ = conn.Close() })
			}
			return err == nil
		})
	})
}

// TestFloodDoesNotDisconnectTheTarget: a sender on one replica floods a
// user on another with large DMs while the target reads nothing. Only the
// sender's burst gets through; the target's socket stays open. (The close
// after repeated refusals is TestFrameLimits'.)
func TestFloodDoesNotDisconnectTheTarget(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	limits := FrameLimits{ConnBurst: 5, ConnRate: 0.001, Strikes: 1000}
	a := startNode(t, dbURL, HubOptions{SendBuffer: 16, Limits: limits})
	b := startNode(t, dbURL, HubOptions{SendBuffer: 16, Limits: limits})
	target, flooder := uuid.NewString(), uuid.NewString()

	// The target's small receive window fills at once: only the hub's
	// 16-frame buffer stands between the flood and a slow-consumer close.
	dialer := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		conn, err := net.Dial(network, addr)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return conn, err
	}}
	conn, _, err := dialer.Dial(b.url+"?user="+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testwait.For(t, 10*time.Second, "target registered", func() bool { return b.hub.hasUser(target) })
	f := dial(t, a, flooder)

	dm, _ := json.Marshal(Frame{Event: "dm", To: target, Payload: json.RawMessage(`"` + strings.Repeat("x", 30000) + `"`)})
	const sent = 300
	for range sent {
		f.send(t, string(dm))
	}
	// Every DM was refused on the sender's node or stored in the target's
	// stream (doorbells are joined, so B's received count is not a DM count:
	// the target's reads below count what reached it).
	limited := a.hub.limits.metrics.limited.WithLabelValues("connection")
	testwait.For(t, 30*time.Second, "every DM refused or stored", func() bool {
		return counterValue(limited)+counterValue(a.bus.metrics.appended) >= sent || counterValue(b.hub.metrics.slow) > 0
	})
	if counterValue(b.hub.metrics.slow) != 0 {
		t.Fatal("the flood closed the target as a slow consumer")
	}
	if got := counterValue(a.bus.metrics.appended); got > 5 {
		t.Fatalf("%v DMs stored, want at most the sender's burst of 5", got)
	}
	rateLimited(t, f.next(t))
	// The target reads now: the DMs, then its own join is answered.
	if err := conn.WriteJSON(Frame{Event: "room.join", Room: "still-here"}); err != nil {
		t.Fatal(err)
	}
	dms := 0
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("target's socket ended after %d DMs: %v", dms, err)
		}
		var fr Frame
		_ = json.Unmarshal(msg, &fr)
		if fr.Event == EventRoomJoined {
			break
		}
		dms++
	}
	if dms > 5 || counterValue(b.hub.metrics.slow) != 0 {
		t.Fatalf("the target read %d DMs; slow consumer count %v", dms, counterValue(b.hub.metrics.slow))
	}
}
