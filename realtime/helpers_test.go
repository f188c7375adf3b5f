package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

// node is one replica's realtime side: its own pool, LISTEN connection,
// hub and an HTTP server whose /ws?user= upgrades without a ticket.
type node struct {
	hub      *Hub
	bus      *Bus
	presence *PresenceTracker // nil unless a busOpts asked for it (withPresence)
	pool     *pgxpool.Pool
	reg      *prometheus.Registry
	url      string
}

// startNode starts a node's bus and serves its hub; opts may change the
// bus's options and ask for presence (the tracker is built, not started).
func startNode(t testing.TB, dbURL string, hopts HubOptions, opts ...func(*Options)) *node {
	t.Helper()
	ctx := context.Background()
	pool, err := db.Connect(ctx, dbURL, db.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{pool: pool, reg: prometheus.NewRegistry()}
	hopts.Store = Streams{DB: pool}
	rtOpts := Options{
		Bus: BusOptions{Pool: pool, Store: Streams{DB: pool}, Registry: n.reg, IdlePing: time.Second, FindUserTimeout: 500 * time.Millisecond},
		Hub: &hopts,
	}
	for _, o := range opts {
		o(&rtOpts)
	}
	rt := New(rtOpts)
	n.hub, n.bus, n.presence = rt.Hub, rt.Bus, rt.Presence
	if err := n.bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := n.hub.Admit(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		_ = n.hub.Serve(w, r, r.URL.Query().Get("user"))
	}))
	n.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n.hub.Shutdown(sctx)
		n.bus.Stop()
		srv.Close()
		pool.Close()
	})
	return n
}

// wsClient is a real WebSocket client whose frames arrive on a channel.
type wsClient struct {
	conn   *websocket.Conn
	frames chan Frame
	done   chan struct{}
	err    error // the read error that ended it, after done
}

func dial(t testing.TB, n *node, user string) *wsClient {
	t.Helper()
	before := n.hub.UserConnectionsLocal(user)
	conn, res, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", n.url, err, res)
	}
	c := &wsClient{conn: conn, frames: make(chan Frame, 1000), done: make(chan struct{})}
	go c.read()
	t.Cleanup(func() { _ = conn.Close() })
	testwait.For(t, 10*time.Second, "connection registered", func() bool { return n.hub.UserConnectionsLocal(user) > before })
	return c
}

func (c *wsClient) read() {
	defer close(c.done)
	for {
		_, msg, err := c.conn.ReadMessage()
		if err != nil {
			c.err = err
			return
		}
		var f Frame
		if json.Unmarshal(msg, &f) == nil {
			c.frames <- f
		}
	}
}

func (c *wsClient) send(t testing.TB, frame any) {
	t.Helper()
	var b []byte
	switch f := frame.(type) {
	case string:
		b = []byte(f)
	default:
		b, _ = json.Marshal(f)
	}
	if err := c.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// next returns the next frame, failing after 10 s.
func (c *wsClient) next(t testing.TB) Frame {
	t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-c.done:
		select { // frames read before the end come first
		case f := <-c.frames:
			return f
		default:
		}
		t.Fatalf("connection ended while waiting for a frame: %v", c.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no frame within 10 s")
	}
	return Frame{}
}

// expect returns the next frame and checks its event.
func (c *wsClient) expect(t testing.TB, event string) Frame {
	t.Helper()
	f := c.next(t)
	if f.Event != event {
		t.Fatalf("got %+v, want event %q", f, event)
	}
	return f
}

// closeCode waits for the connection to end and returns its close code.
func (c *wsClient) closeCode(t testing.TB) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatal("connection still open after 20 s")
	}
	var ce *websocket.CloseError
	if errors.As(c.err, &ce) {
		return ce.Code
	}
	t.Fatalf("connection ended without a close frame: %v", c.err)
	return 0
}

// hasUser reports whether a socket of user is open on h.
func (h *Hub) hasUser(user string) bool { return h.hasRecipients(user, "") }

// waitFor polls cond until it holds, failing after 10 s.

func counterValue(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }
