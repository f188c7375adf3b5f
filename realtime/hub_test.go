package realtime

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

func TestFrames(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{MaxFrameBytes: 1024})

	errorMessage := func(t *testing.T, c *wsClient) string {
		t.Helper()
		f := c.expect(t, EventError)
		var p struct{ Message string }
		if err := json.Unmarshal(f.Payload, &p); err != nil || p.Message == "" {
			t.Fatalf("error frame without a message: %+v", f)
		}
		return p.Message
	}

	t.Run("bad frames get an error event and the connection stays open", func(t *testing.T) {
		t.Parallel()
		c := dial(t, n, uuid.NewString())
		for _, tc := range []struct {
			frame, want string
		}{
			{`not json`, "not a valid JSON object"},
			{`{"room":"r"}`, `no "event"`},
			{`{"event":"dance"}`, `unknown event "dance"`},
			{`{"event":"room.join"}`, `room name is empty`},
			{`{"event":"room.join","room":" "}`, `room name is blank`},
			{`{"event":"room.join","room":" lobby"}`, `white space`},
			{`{"event":"room.join","room":"` + strings.Repeat("r", 150) + `"}`, `the limit is 128`},
			{`{"event":"room.message","room":"lobby","payload":1}`, `join room "lobby" before posting`},
			{`{"event":"dm","to":"bob"}`, "must be a user id"},
			{`{"event":"typing"}`, "exactly one of"},
			{`{"event":"rpc.result","payload":1}`, `needs the "id"`},
			{`{"event":"rpc.result","id":"nope","payload":1}`, "no pending rpc call"},
			{`{"event":"dm","to":"` + uuid.NewString() + `","payload":"` + strings.Repeat("x", 1100) + `"}`, "the limit is 1024"},
			{`{"event":"dm","to":"` + uuid.NewString() + `","payload":"` + "\xff" + `"}`, "not valid UTF-8"},
		} {
			c.send(t, tc.frame)
			if msg := errorMessage(t, c); !strings.Contains(msg, tc.want) {
				t.Errorf("frame %.40s: error %q, want it to mention %q", tc.frame, msg, tc.want)
			}
		}
		if err := c.conn.WriteMessage(websocket.BinaryMessage, []byte{1, 2}); err != nil {
			t.Fatal(err)
		}
		if msg := errorMessage(t, c); !strings.Contains(msg, "binary") {
			t.Errorf("binary frame: %q", msg)
		}
		// Still open and working.
		c.send(t, Frame{Event: "room.join", Room: "still-here"})
		c.expect(t, EventRoomJoined)
	})

	t.Run("error echoes the frame id", func(t *testing.T) {
		t.Parallel()
		c := dial(t, n, uuid.NewString())
		c.send(t, `{"event":"dance","id":"req-1"}`)
		if f := c.expect(t, EventError); f.ID != "req-1" {
			t.Fatalf("id = %q, want req-1", f.ID)
		}
	})

	t.Run("rooms: join, message to members only, leave", func(t *testing.T) {
		t.Parallel()
		alice, bob, carol := uuid.NewString(), uuid.NewString(), uuid.NewString()
		a, b, c := dial(t, n, alice), dial(t, n, bob), dial(t, n, carol)
		for _, cl := range []*wsClient{a, b} {
			cl.send(t, Frame{Event: "room.join", Room: "lobby"})
			if f := cl.expect(t, EventRoomJoined); f.Room != "lobby" || f.TS == "" {
				t.Fatalf("joined: %+v", f)
			}
		}
		if got := n.hub.RoomMembersLocal("lobby"); len(got) != 2 || got[alice] != 1 || got[bob] != 1 {
			t.Fatalf("RoomMembersLocal = %v", got)
		}
		// A forged from and ts are replaced by the server's.
		a.send(t, `{"event":"room.message","room":"lobby","from":"mallory","ts":"1999-01-01T00:00:00Z","payload":{"text":"<hi> & bye"}}`)
		for _, cl := range []*wsClient{a, b} {
			f := cl.expect(t, "room.message")
			if f.From != alice || f.Room != "lobby" || string(f.Payload) != `{"text":"<hi> & bye"}` || f.ID == "" {
				t.Fatalf("room message: %+v", f)
			}
			if ts, err := time.Parse(time.RFC3339Nano, f.TS); err != nil || time.Since(ts) > time.Minute {
				t.Fatalf("ts %q is not the server's time", f.TS)
			}
		}
		// carol is not a member: her first frame is the DM sent after.
		a.send(t, Frame{Event: "dm", To: carol, Payload: json.RawMessage(`"marker"`)})
		if f := c.expect(t, "dm"); string(f.Payload) != `"marker"` || f.From != alice || f.To != carol {
			t.Fatalf("dm: %+v", f)
		}
		b.send(t, Frame{Event: "room.leave", Room: "lobby"})
		b.send(t, Frame{Event: "typing", Room: "lobby"})
		if msg := errorMessage(t, b); !strings.Contains(msg, "join room") {
			t.Fatalf("typing after leaving: %q", msg)
		}
		a.send(t, Frame{Event: "typing", To: strings.ToUpper(bob)})
		if f := b.expect(t, "typing"); f.From != alice {
			t.Fatalf("typing: %+v", f)
		}
	})
}

func TestOrigin(t *testing.T) {
	t.Parallel()
	req := func(host, origin string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "http://"+host+"/v1/ws", nil)
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		return r
	}
	discard := slog.New(slog.DiscardHandler)
	same := newHub(HubOptions{}, discard, nil)
	listed := newHub(HubOptions{AllowedOrigins: []string{"https://app.example.com/", "http://localhost:3000"}}, discard, nil)
	anyOrigin := newHub(HubOptions{AllowedOrigins: []string{"*"}}, discard, nil)
	for _, tc := range []struct {
		name         string
		hub          *Hub
		host, origin string
		ok           bool
	}{
		{"no origin (not a browser)", same, "sb.example.com", "", true},
		{"same host", same, "sb.example.com", "https://sb.example.com", true},
		{"other host", same, "sb.example.com", "https://evil.example.com", false},
		{"listed", listed, "sb.example.com", "https://APP.example.com", true},
		{"listed with port", listed, "sb.example.com", "http://localhost:3000", true},
		{"not listed", listed, "sb.example.com", "https://sb.example.com", false},
		{"wrong scheme", listed, "sb.example.com", "http://app.example.com", false},
		{"any", anyOrigin, "sb.example.com", "https://whatever.example.org", true},
		{"garbage", same, "sb.example.com", "::::", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.hub.Admit(req(tc.host, tc.origin))
			if (err == nil) != tc.ok {
				t.Fatalf("Admit = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	t.Run("not an upgrade", func(t *testing.T) {
		t.Parallel()
		if err := same.Admit(httptest.NewRequest(http.MethodGet, "/v1/ws", nil)); err == nil || !strings.Contains(err.Error(), "WebSocket") {
			t.Fatalf("Admit of a plain GET = %v", err)
		}
	})
}

func TestSlowConsumerIsClosedWith3008(t *testing.T) {
	t.Parallel()
	// Ephemeral frames (typing) that overflow the queue make a slow
	// consumer; stored events wait instead (TestSlowReaderLosesNothing).
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{SendBuffer: 16, SendQueueBytes: 64 << 10})
	user := uuid.NewString()
	// A small receive window, so the kernel buffers fill quickly.
	var tcp *net.TCPConn
	dialer := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		conn, err := net.Dial(network, addr)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
			tcp = tc
		}
		return conn, err
	}}
	conn, _, err := dialer.Dial(n.url+"?user="+user, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testwait.For(t, 10*time.Second, "connection registered", func() bool { return n.hub.hasUser(user) })
	other := dial(t, n, uuid.NewString())

	// The client reads nothing while frames pour in.
	payload := json.RawMessage(`"` + strings.Repeat("x", 4000) + `"`)
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for counterValue(n.hub.metrics.slow) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no slow consumer detected")
		}
		for range 50 {
			if err := n.bus.PublishUser(ctx, user, "typing", payload); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Now it reads, with a normal window: everything queued, then the close frame with 3008.
	_ = tcp.SetReadBuffer(1 << 20)
	var closeErr *websocket.CloseError
	for {
		if _, _, err = conn.ReadMessage(); err != nil {
			break
		}
	}
	if !asCloseError(err, &closeErr) || closeErr.Code != CloseSlowConsumer {
		t.Fatalf("read ended with %v, want close code 3008", err)
	}
	testwait.For(t, 10*time.Second, "slow connection gone", func() bool { return !n.hub.hasUser(user) })
	if got := counterValue(n.hub.metrics.slow); got != 1 {
		t.Fatalf("slow consumer metric = %v, want 1", got)
	}
	// Other connections are unaffected.
	other.send(t, Frame{Event: "room.join", Room: "fine"})
	other.expect(t, EventRoomJoined)
}

func asCloseError(err error, target **websocket.CloseError) bool {
	ce, ok := err.(*websocket.CloseError)
	if ok {
		*target = ce
	}
	return ok
}

func TestDrainAndShutdown(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{})
	user := uuid.NewString()
	a, b := dial(t, n, user), dial(t, n, user)
	if got := n.hub.LocalConnections(); got != 2 {
		t.Fatalf("LocalConnections = %d", got)
	}
	n.hub.DrainLocal()
	a.expect(t, EventDraining)
	b.expect(t, EventDraining)
	if _, res, err := websocket.DefaultDialer.Dial(n.url+"?user=x", nil); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("dial while draining: %v %v", err, res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.hub.Shutdown(ctx)
	for _, c := range []*wsClient{a, b} {
		if code := c.closeCode(t); code != CloseGoingAway {
			t.Fatalf("close code %d, want %d", code, CloseGoingAway)
		}
	}
	if got := n.hub.LocalConnections(); got != 0 {
		t.Fatalf("LocalConnections after shutdown = %d", got)
	}
}

func TestDisconnectUserLocal(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{})
	user, other := uuid.NewString(), uuid.NewString()
	a, b, o := dial(t, n, user), dial(t, n, user), dial(t, n, other)
	if got := n.hub.DisconnectUserLocal(user); got != 2 {
		t.Fatalf("DisconnectUserLocal = %d, want 2", got)
	}
	for _, c := range []*wsClient{a, b} {
		if code := c.closeCode(t); code != CloseDisconnected {
			t.Fatalf("close code %d, want %d", code, CloseDisconnected)
		}
	}
	testwait.For(t, 10*time.Second, "sockets gone", func() bool { return n.hub.LocalConnections() == 1 })
	o.send(t, Frame{Event: "room.join", Room: "x"})
	o.expect(t, EventRoomJoined)
}

// A socket is indexed before the upgrade answers 101: an event published
// as soon as the client sees the socket open reaches it.
func TestOpenSocketMissesNothing(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{})
	for i := range 20 {
		user := uuid.NewString()
		conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.bus.PublishUser(context.Background(), user, "first", i); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var f Frame
		if err := conn.ReadJSON(&f); err != nil || f.Event != "first" {
			t.Fatalf("attempt %d: %+v %v", i, f, err)
		}
		conn.Close()
	}
}
