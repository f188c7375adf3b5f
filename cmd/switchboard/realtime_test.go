package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime"
)

// realtimeCluster is three replicas serving WebSockets (A also works jobs)
// and a worker-only replica W, all on one database; B and C are web-only.
type realtimeCluster struct {
	dbURL      string
	a, b, c, w *testServer
}

func startRealtimeCluster(t *testing.T) *realtimeCluster {
	t.Helper()
	dbURL := dbtest.NewDatabaseURL(t)
	cfg := func(roles ...string) config.Config {
		c := testConfig(t, dbURL)
		c.Roles = roles
		// A slow consumer's close frame waits behind the write stuck
		// since its buffers filled, which is cut after WriteWait: the
		// slow-consumer subtest reads again once it sees the socket
		// counted, which on a loaded machine can be well past 10 s.
		c.WSLimits.WriteWait = 3 * time.Minute
		return c
	}
	return &realtimeCluster{
		dbURL: dbURL,
		a:     startServer(t, cfg(config.RoleWeb, config.RoleWorker)),
		b:     startServer(t, cfg(config.RoleWeb)),
		c:     startServer(t, cfg(config.RoleWeb)),
		w:     startServer(t, cfg(config.RoleWorker)),
	}
}

// sock is a real WebSocket client; frames arrive on a channel, presence
// frames on their own (presence_test.go reads them).
type sock struct {
	conn     *websocket.Conn
	frames   chan realtime.Frame
	presence chan realtime.Frame
	done     chan struct{}
	err      error
}

func wsURL(srv *testServer, ticket string) string {
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws?ticket=" + ticket
}

func issueTicket(t testing.TB, srv *testServer, token string) string {
	t.Helper()
	status, body := call(t, http.MethodPost, srv.URL+"/v1/ws/ticket", nil, token)
	if status != http.StatusCreated {
		t.Fatalf("ticket: %d %v", status, body)
	}
	return body["ticket"].(string)
}

// connect opens a socket on srv with a ticket issued by srv.
func connect(t *testing.T, srv *testServer, token string) *sock {
	t.Helper()
	return dialSock(t, websocket.DefaultDialer, wsURL(srv, issueTicket(t, srv, token)))
}

func dialSock(t *testing.T, d *websocket.Dialer, url string) *sock {
	t.Helper()
	conn, res, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	s := &sock{conn: conn, frames: make(chan realtime.Frame, 256), presence: make(chan realtime.Frame, 1024), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			var f realtime.Frame
			if err := conn.ReadJSON(&f); err != nil {
				s.err = err
				return
			}
			if strings.HasPrefix(f.Event, "presence.") {
				s.presence <- f
				continue
			}
			s.frames <- f
		}
	}()
	t.Cleanup(func() { _ = conn.Close() })
	return s
}

func (s *sock) send(t *testing.T, f realtime.Frame) {
	t.Helper()
	if err := s.conn.WriteJSON(f); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// expect checks that the next frame has the given event.
func (s *sock) expect(t *testing.T, event string) realtime.Frame {
	t.Helper()
	var f realtime.Frame
	select {
	case f = <-s.frames:
	case <-s.done:
		select { // frames read before the close come first
		case f = <-s.frames:
		default:
			t.Fatalf("socket closed while waiting for %q: %v", event, s.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q within 10 s", event)
	}
	if f.Event != event {
		t.Fatalf("got %+v, want event %q", f, event)
	}
	return f
}

// waitUntil polls cond until it holds, failing after 15 s.

// metric reads one sample from srv's /metrics.

// connected waits until srv holds n sockets of user.
func connected(t *testing.T, srv *testServer, user string, n int) {
	t.Helper()
	testwait.For(t, 15*time.Second, "sockets registered", func() bool { return srv.rt.Hub.UserConnectionsLocal(user) == n })
}

func TestRealtimeAcrossThreeReplicas(t *testing.T) {
	t.Parallel()
	cl := startRealtimeCluster(t)
	ctx := context.Background()

	t.Run("ticket from A connects on B; used on C, expired, or raced: refused", func(t *testing.T) {
		t.Parallel()
		token, user := registerUser(t, cl.a, "ticket@example.com")
		ticket := issueTicket(t, cl.a, token)
		dialSock(t, websocket.DefaultDialer, wsURL(cl.b, ticket))
		refused := func(url string) {
			t.Helper()
			_, res, err := websocket.DefaultDialer.Dial(url, nil)
			if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized || res.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("want 401 problem+json, got %v %v", err, res)
			}
		}
		refused(wsURL(cl.c, ticket))

		expired := issueTicket(t, cl.a, token)
		conn, err := pgx.Connect(ctx, cl.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `UPDATE ws_tickets SET expires_at = now() - interval '1 second' WHERE user_id = $1`, user); err != nil {
			t.Fatal(err)
		}
		refused(wsURL(cl.b, expired))

		for range 5 {
			ticket := issueTicket(t, cl.c, token)
			var wg sync.WaitGroup
			statuses := make([]int, 2)
			for i, srv := range []*testServer{cl.b, cl.c} {
				wg.Go(func() {
					conn, res, err := websocket.DefaultDialer.Dial(wsURL(srv, ticket), nil)
					if err == nil {
						statuses[i] = http.StatusSwitchingProtocols
						conn.Close()
					} else if res != nil {
						statuses[i] = res.StatusCode
					}
				})
			}
			wg.Wait()
			if (statuses[0] == 101) == (statuses[1] == 101) || statuses[0]+statuses[1] != 101+401 {
				t.Fatalf("two concurrent uses of one ticket: %v, want exactly one 101 and one 401", statuses)
			}
		}
	})

	t.Run("a DM from A reaches the recipient's sockets on A, B and C and nobody else", func(t *testing.T) {
		t.Parallel()
		senderTok, sender := registerUser(t, cl.a, "dm-sender@example.com")
		rcptTok, rcpt := registerUser(t, cl.b, "dm-rcpt@example.com")
		otherTok, other := registerUser(t, cl.c, "dm-other@example.com")
		from := connect(t, cl.a, senderTok)
		var rcpts, others []*sock
		for _, srv := range []*testServer{cl.a, cl.b, cl.c} {
			rcpts = append(rcpts, connect(t, srv, rcptTok))
			others = append(others, connect(t, srv, otherTok))
		}
		for _, srv := range []*testServer{cl.a, cl.b, cl.c} {
			connected(t, srv, rcpt, 1)
			connected(t, srv, other, 1)
		}
		from.send(t, realtime.Frame{Event: "dm", To: rcpt, From: other, Payload: json.RawMessage(`{"text":"psst"}`)})
		for _, s := range rcpts {
			f := s.expect(t, "dm")
			if f.From != sender || f.To != rcpt || string(f.Payload) != `{"text":"psst"}` || f.TS == "" {
				t.Fatalf("dm frame %+v", f)
			}
		}
		// The other user's first frame everywhere is the marker sent after the DM.
		requireNothingBeforeMarker(t, from, other, others)
	})

	t.Run("a room message from C reaches members on A and B, not non-members", func(t *testing.T) {
		t.Parallel()
		tokA, _ := registerUser(t, cl.a, "room-a@example.com")
		tokB, _ := registerUser(t, cl.a, "room-b@example.com")
		tokC, userC := registerUser(t, cl.a, "room-c@example.com")
		tokN, nonMember := registerUser(t, cl.a, "room-n@example.com")
		memberA, memberB, poster := connect(t, cl.a, tokA), connect(t, cl.b, tokB), connect(t, cl.c, tokC)
		outsiders := []*sock{connect(t, cl.a, tokN), connect(t, cl.b, tokN)}
		for _, s := range []*sock{memberA, memberB, poster} {
			s.send(t, realtime.Frame{Event: "room.join", Room: "standup"})
			if f := s.expect(t, realtime.EventRoomJoined); f.Room != "standup" {
				t.Fatalf("joined %+v", f)
			}
		}
		connected(t, cl.a, nonMember, 1)
		connected(t, cl.b, nonMember, 1)
		poster.send(t, realtime.Frame{Event: "room.message", Room: "standup", Payload: json.RawMessage(`"done"`)})
		for _, s := range []*sock{memberA, memberB, poster} {
			if f := s.expect(t, "room.message"); f.From != userC || f.Room != "standup" || string(f.Payload) != `"done"` {
				t.Fatalf("room frame %+v", f)
			}
		}
		requireNothingBeforeMarker(t, poster, nonMember, outsiders)
	})

	t.Run("a 20 KB payload crosses replicas intact", func(t *testing.T) {
		t.Parallel()
		tokS, _ := registerUser(t, cl.a, "big-sender@example.com")
		tokR, rcpt := registerUser(t, cl.a, "big-rcpt@example.com")
		from, to := connect(t, cl.a, tokS), connect(t, cl.c, tokR)
		connected(t, cl.c, rcpt, 1)
		payload := json.RawMessage(`{"blob":"` + strings.Repeat("ü", 10000) + `"}`) // 20 KB in bytes, 10 K runes
		before := metric(t, cl.a, "switchboard_bus_spilled_total", "")
		from.send(t, realtime.Frame{Event: "dm", To: rcpt, Payload: payload})
		if f := to.expect(t, "dm"); string(f.Payload) != string(payload) || f.Offset == 0 {
			t.Fatalf("payload of %d bytes arrived as %d bytes, offset %d", len(payload), len(f.Payload), f.Offset)
		}
		// Stored: C read it from the stream (the doorbell had no room for it).
		from.send(t, realtime.Frame{Event: "typing", To: rcpt, Payload: payload})
		if f := to.expect(t, "typing"); string(f.Payload) != string(payload) {
			t.Fatalf("typing payload of %d bytes arrived as %d bytes", len(payload), len(f.Payload))
		}
		if metric(t, cl.a, "switchboard_bus_spilled_total", "") <= before {
			t.Fatal("the ephemeral payload did not take the spill path")
		}
	})

	t.Run("RPC from A to a user on C: result, 504, 404", func(t *testing.T) {
		t.Parallel()
		tok, user := registerUser(t, cl.a, "rpc-user@example.com")
		s := connect(t, cl.c, tok)
		connected(t, cl.c, user, 1)
		type answer struct {
			status int
			body   map[string]any
		}
		done := make(chan answer, 1)
		go func() {
			status, body := call(t, http.MethodPost, cl.a.URL+"/v1/users/"+user+"/rpc", map[string]any{"method": "sum", "params": []int{2, 3}, "timeout_ms": 5000}, tok)
			done <- answer{status, body}
		}()
		f := s.expect(t, realtime.EventRPCCall)
		if string(f.Payload) != `{"method":"sum","params":[2,3]}` {
			t.Fatalf("rpc.call %+v", f)
		}
		s.send(t, realtime.Frame{Event: "rpc.result", ID: f.ID, Payload: json.RawMessage(`{"sum":5}`)})
		if a := <-done; a.status != http.StatusOK || a.body["result"].(map[string]any)["sum"] != float64(5) {
			t.Fatalf("rpc: %d %v", a.status, a.body)
		}

		status, body := call(t, http.MethodPost, cl.a.URL+"/v1/users/"+user+"/rpc", map[string]any{"method": "ignored", "timeout_ms": 300}, tok)
		if status != http.StatusGatewayTimeout {
			t.Fatalf("unanswered rpc: %d %v", status, body)
		}
		s.expect(t, realtime.EventRPCCall)

		offTok, offline := registerUser(t, cl.b, "rpc-offline@example.com")
		status, body = call(t, http.MethodPost, cl.a.URL+"/v1/users/"+offline+"/rpc", map[string]any{"method": "x"}, offTok)
		if status != http.StatusNotFound {
			t.Fatalf("rpc to an offline user: %d %v", status, body)
		}
	})

	t.Run("a run event published on the worker-only replica reaches the owner on a web-only one", func(t *testing.T) {
		t.Parallel()
		tok, owner := registerUser(t, cl.b, "run-owner@example.com")
		s := connect(t, cl.b, tok)
		connected(t, cl.b, owner, 1)
		if cl.w.rt.Hub != nil {
			t.Fatal("a worker-only replica has a hub")
		}
		var pub interface {
			PublishUser(ctx context.Context, userID, event string, payload any) error
		} = cl.w.bus
		run := map[string]any{"id": "run-1", "status": "succeeded"}
		if err := pub.PublishUser(ctx, owner, "task.run.succeeded", run); err != nil {
			t.Fatal(err)
		}
		if f := s.expect(t, "task.run.succeeded"); string(f.Payload) != `{"id":"run-1","status":"succeeded"}` {
			t.Fatalf("run event %+v", f)
		}
	})

	t.Run("a client that stops reading is closed with 3008 and counted", func(t *testing.T) {
		t.Parallel()
		tok, user := registerUser(t, cl.a, "slow@example.com")
		var tcp *net.TCPConn
		d := &websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
			conn, err := net.Dial(network, addr)
			if c, ok := conn.(*net.TCPConn); ok {
				_ = c.SetReadBuffer(4096) // a small window: the kernel buffers fill fast
				tcp = c
			}
			return conn, err
		}}
		conn, _, err := d.Dial(wsURL(cl.a, issueTicket(t, cl.a, tok)), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		connected(t, cl.a, user, 1)
		// Floods from C, across the bus, paced by what A has taken in so
		// the bus is not backed up for the other tests.
		payload := map[string]string{"fill": strings.Repeat("x", 4000)}
		base, sent := metric(t, cl.a, "switchboard_bus_received_total", ""), 0.0
		deadline := time.Now().Add(60 * time.Second) // a bound for failing; quiet, it takes ~4 s, 28 s on a 2-core machine with 10 busy loops
		slow := func() bool { return metric(t, cl.a, "switchboard_ws_slow_consumer_disconnects_total", "") > 0 }
		// The test reads again once the hub gives up on the socket: its
		// close frame waits behind the server's write stuck since the
		// buffers filled, cut after the cluster's WriteWait. It looks
		// every 16 frames, and a flood of 256 (the hub's 1 MiB send queue
		// in 4 KB frames) overflows the queue once the buffers are full.
		flood := func() bool { // false: the slow consumer was detected
			for range 16 {
				if slow() {
					return false
				}
				for range 16 {
					// Ephemeral: stored events wait for a slow reader instead (no 3008).
					if err := cl.c.bus.PublishUser(ctx, user, "typing", payload); err != nil {
						t.Fatal(err)
					}
				}
				sent += 16
			}
			return true
		}
		for flood() {
			if time.Now().After(deadline) {
				t.Fatal("the slow consumer was never detected")
			}
			testwait.For(t, 15*time.Second, "A took in the flood", func() bool {
				return slow() || metric(t, cl.a, "switchboard_bus_received_total", "")-base >= sent
			})
		}
		_ = tcp.SetReadBuffer(1 << 20)
		for {
			if _, _, err = conn.ReadMessage(); err != nil {
				break
			}
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != realtime.CloseSlowConsumer {
			t.Fatalf("connection ended with %v, want close code 3008", err)
		}
		if got := metric(t, cl.a, "switchboard_ws_slow_consumer_disconnects_total", ""); got != 1 {
			t.Fatalf("slow consumer metric = %v, want 1", got)
		}
	})
}

func TestRealtimeListenConnectionKilled(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b, c := startServer(t, testConfig(t, dbURL)), startServer(t, testConfig(t, dbURL)), startServer(t, testConfig(t, dbURL))
	ctx := context.Background()
	tokS, _ := registerUser(t, a, "kill-sender@example.com")
	tokR, rcpt := registerUser(t, a, "kill-rcpt@example.com")
	from, to, onC := connect(t, a, tokS), connect(t, b, tokR), connect(t, c, tokR)
	connected(t, b, rcpt, 1)
	connected(t, c, rcpt, 1)
	from.send(t, realtime.Frame{Event: "dm", To: rcpt, Payload: json.RawMessage(`"before"`)})
	to.expect(t, "dm")
	onC.expect(t, "dm")

	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	ready := func(srv *testServer) (int, string) {
		status, body := call(t, http.MethodGet, srv.URL+"/healthz/ready", nil, "")
		reason, _ := body["reason"].(string)
		return status, reason
	}
	// Kill B's LISTEN backend until readiness is seen failing because of it.
	deadline := time.Now().Add(20 * time.Second)
	for dipped := false; !dipped; {
		if time.Now().After(deadline) {
			t.Fatal("readiness never dipped")
		}
		var killed int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, b.bus.ListenApplicationName()).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		if killed == 0 {
			continue
		}
		for range 10 {
			status, reason := ready(b)
			if status == http.StatusServiceUnavailable {
				if !strings.HasPrefix(reason, "listen:") {
					t.Fatalf("readiness reason %q, want the LISTEN connection", reason)
				}
				dipped = true
				break
			}
		}
	}
	testwait.For(t, 15*time.Second, "readiness recovered", func() bool { status, _ := ready(b); return status == http.StatusOK })
	if n := metric(t, b, "switchboard_bus_listen_reconnects_total", ""); n < 1 {
		t.Fatalf("reconnects metric = %v", n)
	}
	if status, _ := ready(c); status != http.StatusOK {
		t.Fatal("another replica's readiness was affected")
	}
	from.send(t, realtime.Frame{Event: "dm", To: rcpt, Payload: json.RawMessage(`"after"`)})
	if f := to.expect(t, "dm"); string(f.Payload) != `"after"` {
		t.Fatalf("after reconnect: %+v", f)
	}
	if f := onC.expect(t, "dm"); string(f.Payload) != `"after"` {
		t.Fatalf("on C: %+v", f)
	}
}

func TestRealtimeDrainAndShutdown(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b := startServer(t, testConfig(t, dbURL)), startServer(t, testConfig(t, dbURL))
	tok, user := registerUser(t, a, "drain@example.com")
	onA, onB := connect(t, a, tok), connect(t, b, tok)
	connected(t, a, user, 1)

	a.rt.Hub.DrainLocal()
	onA.expect(t, realtime.EventDraining)
	if status, body := call(t, http.MethodGet, a.URL+"/healthz/ready", nil, ""); status != http.StatusServiceUnavailable || !strings.HasPrefix(body["reason"].(string), "websockets:") {
		t.Fatalf("ready while draining: %d %v", status, body)
	}
	_, res, err := websocket.DefaultDialer.Dial(wsURL(a, issueTicket(t, a, tok)), nil)
	if err == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("upgrade while draining: %v %v", err, res)
	}

	// Shutdown of B: server.draining, then close 1001, before HTTP stops.
	b.Stop()
	onB.expect(t, realtime.EventDraining)
	<-onB.done
	var ce *websocket.CloseError
	if !errors.As(onB.err, &ce) || ce.Code != realtime.CloseGoingAway {
		t.Fatalf("socket on a stopped node ended with %v, want 1001", onB.err)
	}
}

// requireNothingBeforeMarker proves a negative without sleeping: from sends
// a DM marker to user, and each of user's sockets must see it as its first
// frame — replicas deliver one node's events in order, so anything that
// leaked to user earlier would arrive first.
func requireNothingBeforeMarker(t *testing.T, from *sock, user string, socks []*sock) {
	t.Helper()
	from.send(t, realtime.Frame{Event: "dm", To: user, Payload: json.RawMessage(`"marker"`)})
	for _, s := range socks {
		if f := s.expect(t, "dm"); string(f.Payload) != `"marker"` {
			t.Fatalf("user %s got %+v before the marker", user, f)
		}
	}
}
