package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime"
)

type realtimeBundle struct {
	*testBundle
	hub *realtime.Hub
	url string // http://host of a real server, for WebSockets
}

// setupRealtime is a server with the realtime routes on a real hub and bus.
func setupRealtime(t *testing.T) *realtimeBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	reg := prometheus.NewRegistry()
	rt := realtime.New(realtime.Options{
		Bus: realtime.BusOptions{Pool: pool, Registry: reg, FindUserTimeout: 300 * time.Millisecond}, Hub: &realtime.HubOptions{},
	})
	hub, bus := rt.Hub, rt.Bus
	if err := bus.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := New(Options{
		Pool: pool, Registry: reg, PublicAPI: true, JWTSecret: testSecret, BcryptCost: 4,
		Tickets: realtime.Tickets{DB: pool}, Sockets: hub, Events: bus, RPC: bus,
	})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hub.Shutdown(ctx)
		bus.Stop()
		srv.Close()
	})
	return &realtimeBundle{testBundle: &testBundle{server: s}, hub: hub, url: srv.URL}
}

func (b *realtimeBundle) ticket(t *testing.T, token string) string {
	t.Helper()
	res := b.do(t, http.MethodPost, "/v1/ws/ticket", nil, token)
	if res.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", res.status, res.raw)
	}
	return res.body["ticket"].(string)
}

func (b *realtimeBundle) wsURL(ticket string) string {
	return "ws" + strings.TrimPrefix(b.url, "http") + "/v1/ws?ticket=" + ticket
}

// connect opens a socket with a fresh ticket.
func (b *realtimeBundle) connect(t *testing.T, token string) *websocket.Conn {
	t.Helper()
	conn, res, err := websocket.DefaultDialer.Dial(b.wsURL(b.ticket(t, token)), nil)
	if err != nil {
		t.Fatalf("dial: %v %v", err, res)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func readFrame(t *testing.T, conn *websocket.Conn) realtime.Frame {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var f realtime.Frame
	if err := conn.ReadJSON(&f); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	return f
}

// requireRawProblem checks a problem+json answer from a real server.
func requireRawProblem(t *testing.T, res *http.Response, status int) {
	t.Helper()
	if res == nil {
		t.Fatalf("no response, want %d", status)
	}
	body, _ := io.ReadAll(res.Body)
	var p map[string]any
	_ = json.Unmarshal(body, &p)
	if res.StatusCode != status || res.Header.Get("Content-Type") != "application/problem+json" || p["detail"] == "" {
		t.Fatalf("got %d %q %s, want %d problem+json", res.StatusCode, res.Header.Get("Content-Type"), body, status)
	}
}

func TestWebSocketTickets(t *testing.T) {
	t.Parallel()
	b := setupRealtime(t)
	token, _ := b.register(t, "ws-tickets@example.com")

	t.Run("issued", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodPost, "/v1/ws/ticket", nil, token)
		exp, err := time.Parse(time.RFC3339, res.body["expires_at"].(string))
		if res.status != http.StatusCreated || len(res.body["ticket"].(string)) != 43 || err != nil || time.Until(exp) > 31*time.Second {
			t.Fatalf("ticket: %d %s", res.status, res.raw)
		}
	})
	t.Run("needs a token", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, b.do(t, http.MethodPost, "/v1/ws/ticket", nil, ""), http.StatusUnauthorized)
	})
	t.Run("missing, unknown and used tickets: 401 before the upgrade", func(t *testing.T) {
		t.Parallel()
		for _, url := range []string{
			strings.TrimSuffix(b.wsURL(""), "?ticket="),
			b.wsURL("not-a-ticket"),
			b.wsURL(strings.Repeat("A", 43)),
		} {
			_, res, err := websocket.DefaultDialer.Dial(url, nil)
			if err == nil {
				t.Fatalf("%s upgraded", url)
			}
			requireRawProblem(t, res, http.StatusUnauthorized)
		}
		ticket := b.ticket(t, token)
		conn, _, err := websocket.DefaultDialer.Dial(b.wsURL(ticket), nil)
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		_, res, err := websocket.DefaultDialer.Dial(b.wsURL(ticket), nil)
		if err == nil {
			t.Fatal("a used ticket upgraded")
		}
		requireRawProblem(t, res, http.StatusUnauthorized)
	})
	t.Run("more sockets than a user may hold: 429", func(t *testing.T) {
		t.Parallel()
		many, _ := b.register(t, "ws-many@example.com")
		for range 20 { // the default SWITCHBOARD_WS_MAX_CONNS_PER_USER
			b.connect(t, many)
		}
		_, res, err := websocket.DefaultDialer.Dial(b.wsURL(b.ticket(t, many)), nil)
		if err == nil {
			t.Fatal("a 21st socket upgraded")
		}
		requireRawProblem(t, res, http.StatusTooManyRequests)
	})
	t.Run("refusals before the ticket is spent", func(t *testing.T) {
		t.Parallel()
		ticket := b.ticket(t, token)
		_, res, err := websocket.DefaultDialer.Dial(b.wsURL(ticket), http.Header{"Origin": {"https://evil.example.com"}})
		if err == nil {
			t.Fatal("foreign origin upgraded")
		}
		requireRawProblem(t, res, http.StatusForbidden)
		plain, err := http.Get(b.url + "/v1/ws?ticket=" + ticket)
		if err != nil {
			t.Fatal(err)
		}
		requireRawProblem(t, plain, http.StatusBadRequest)
		plain.Body.Close()
		// The ticket still works.
		conn, _, err := websocket.DefaultDialer.Dial(b.wsURL(ticket), http.Header{"Origin": {b.url}})
		if err != nil {
			t.Fatalf("same-origin connect with the unspent ticket: %v", err)
		}
		conn.Close()
	})
}

func TestPublishEvent(t *testing.T) {
	t.Parallel()
	b := setupRealtime(t)
	token, me := b.register(t, "events@example.com")
	conn := b.connect(t, token)

	t.Run("to a user", func(t *testing.T) {
		res := b.do(t, http.MethodPost, "/v1/events", map[string]any{"to": me, "event": "note", "payload": map[string]int{"a": 1}}, token)
		if res.status != http.StatusAccepted || uuid.Validate(res.body["id"].(string)) != nil {
			t.Fatalf("publish: %d %s", res.status, res.raw)
		}
		f := readFrame(t, conn)
		if f.Event != "note" || f.From != me || f.To != me || f.ID != res.body["id"] || string(f.Payload) != `{"a":1}` {
			t.Fatalf("frame %+v", f)
		}
	})
	t.Run("to a room", func(t *testing.T) {
		if err := conn.WriteJSON(realtime.Frame{Event: "room.join", Room: "ops"}); err != nil {
			t.Fatal(err)
		}
		if f := readFrame(t, conn); f.Event != realtime.EventRoomJoined {
			t.Fatalf("frame %+v", f)
		}
		res := b.do(t, http.MethodPost, "/v1/events", map[string]any{"room": "ops", "event": "deploy"}, token)
		if res.status != http.StatusAccepted {
			t.Fatalf("publish: %d %s", res.status, res.raw)
		}
		if f := readFrame(t, conn); f.Event != "deploy" || f.Room != "ops" {
			t.Fatalf("frame %+v", f)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			body any
		}{
			{"task prefix", map[string]any{"to": me, "event": "task.run.succeeded"}},
			{"rpc prefix", map[string]any{"to": me, "event": "rpc.call"}},
			{"server prefix", map[string]any{"to": me, "event": "server.draining"}},
			{"room prefix", map[string]any{"room": "r", "event": "room.message"}},
			{"both targets", map[string]any{"to": me, "room": "r", "event": "x"}},
			{"no target", map[string]any{"event": "x"}},
			{"to not a uuid", map[string]any{"to": "bob", "event": "x"}},
			{"no event", map[string]any{"to": me}},
			{"bad event name", map[string]any{"to": me, "event": "has space"}},
			{"control character in room", map[string]any{"room": "a\nb", "event": "x"}},
			{"blank room", map[string]any{"room": " ", "event": "x"}},
			{"room with white space around it", map[string]any{"room": " ops ", "event": "x"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				requireProblem(t, b.do(t, http.MethodPost, "/v1/events", tc.body, token), http.StatusUnprocessableEntity)
			})
		}
		t.Run("payload not UTF-8", func(t *testing.T) {
			t.Parallel()
			body := []byte(`{"to":"` + me + `","event":"x","payload":"` + "\xff" + `"}`)
			requireProblem(t, b.do(t, http.MethodPost, "/v1/events", body, token), http.StatusUnprocessableEntity)
		})
		t.Run("too large", func(t *testing.T) {
			t.Parallel()
			res := b.do(t, http.MethodPost, "/v1/events", map[string]any{"to": me, "event": "x", "payload": strings.Repeat("x", 70<<10)}, token)
			requireProblem(t, res, http.StatusRequestEntityTooLarge)
		})
		t.Run("unauthenticated", func(t *testing.T) {
			t.Parallel()
			requireProblem(t, b.do(t, http.MethodPost, "/v1/events", map[string]any{"to": me, "event": "x"}, ""), http.StatusUnauthorized)
		})
	})
}

func TestUserRPC(t *testing.T) {
	t.Parallel()
	b := setupRealtime(t)
	token, me := b.register(t, "rpc@example.com")
	otherToken, other := b.register(t, "rpc-other@example.com")
	adminToken, _ := b.registerAdmin(t, "boss-rpc@example.com")
	rpc := func(token, user string, body any) response {
		return b.do(t, http.MethodPost, "/v1/users/"+user+"/rpc", body, token)
	}

	t.Run("answered", func(t *testing.T) {
		t.Parallel()
		conn := b.connect(t, otherToken)
		done := make(chan response, 1)
		go func() { done <- rpc(adminToken, other, map[string]any{"method": "add", "params": []int{1, 2}}) }()
		f := readFrame(t, conn)
		if f.Event != realtime.EventRPCCall || string(f.Payload) != `{"method":"add","params":[1,2]}` {
			t.Fatalf("call frame %+v", f)
		}
		if err := conn.WriteJSON(realtime.Frame{Event: "rpc.result", ID: f.ID, Payload: json.RawMessage(`3`)}); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res.status != http.StatusOK || res.body["result"] != float64(3) {
			t.Fatalf("rpc: %d %s", res.status, res.raw)
		}
	})
	t.Run("no answer: 504", func(t *testing.T) {
		t.Parallel()
		tok, id := b.register(t, "rpc-silent@example.com")
		b.connect(t, tok)
		requireProblem(t, rpc(tok, id, map[string]any{"method": "x", "timeout_ms": 200}), http.StatusGatewayTimeout)
	})
	t.Run("not connected: 404", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, rpc(token, me, map[string]any{"method": "x"}), http.StatusNotFound)
	})
	t.Run("another user's client: 403", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, rpc(token, other, map[string]any{"method": "x"}), http.StatusForbidden)
	})
	for _, tc := range []struct {
		name string
		user string
		body any
	}{
		{"timeout over 30 s", me, map[string]any{"method": "x", "timeout_ms": 30001}},
		{"no method", me, map[string]any{"params": 1}},
		{"user id not a uuid", "bob", map[string]any{"method": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireProblem(t, rpc(token, tc.user, tc.body), http.StatusUnprocessableEntity)
		})
	}
}

func TestRealtimeInOpenAPI(t *testing.T) {
	t.Parallel()
	b := setupRealtime(t)
	paths := b.do(t, http.MethodGet, "/openapi.json", nil, "").body["paths"].(map[string]any)
	for _, p := range []string{"/v1/ws/ticket", "/v1/ws", "/v1/events", "/v1/users/{id}/rpc"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("%s missing from the OpenAPI document", p)
		}
	}
}
