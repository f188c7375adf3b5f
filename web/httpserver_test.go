package web

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/switchboard/switchboard/realtime"
)

// shortTimeout is every timeout of the servers in these tests.
const shortTimeout = 200 * time.Millisecond

// safety bounds how long a test waits for the server to cut a connection;
// only a server that never cuts reaches it.
const safety = 10 * time.Second

// serveWithTimeouts serves h on a real socket through NewHTTPServer with
// short timeouts and returns its address.
func serveWithTimeouts(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(h, HTTPServerOptions{ReadHeaderTimeout: shortTimeout, IdleTimeout: shortTimeout})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// cutAfter writes raw to a new connection to addr and returns what the
// server answered before it closed the connection. It fails the test if
// the server keeps the connection open.
func cutAfter(t *testing.T, addr, raw string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(safety))
	got, err := io.ReadAll(conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server kept the connection open (%q sent, %q answered)", raw, got)
	}
	return string(got)
}

func shortBodies(o *Options) { o.BodyReadTimeout = shortTimeout }

// readsBody is a plain handler that reads its whole body, as the internal
// routes do, then answers.
func readsBody(w http.ResponseWriter, r *http.Request) {
	if _, err := io.ReadAll(r.Body); err != nil {
		return
	}
	_, _ = io.WriteString(w, "read")
}

func TestSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	b := setupEveryRoute(t, shortBodies)
	// Mounted like the internal routes: outside Huma, on the router.
	b.server.Router().Post("/plain", readsBody)
	api := serveWithTimeouts(t, b.server)

	t.Run("headers that never end", func(t *testing.T) {
		t.Parallel()
		cutAfter(t, api, "GET /healthz/live HTTP/1.1\r\nHost: x\r\n")
	})
	t.Run("headers, then a body that never comes, on an API route", func(t *testing.T) {
		t.Parallel()
		got := cutAfter(t, api, "POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
		if !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Fatalf("answered %q, want a 408", got)
		}
	})
	t.Run("headers, then a body that never comes, on a plain route", func(t *testing.T) {
		t.Parallel()
		cutAfter(t, api, "POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
	})
	t.Run("a chunked body that never ends", func(t *testing.T) {
		t.Parallel()
		cutAfter(t, api, "POST /plain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
	})
	t.Run("a kept-alive connection that idles", func(t *testing.T) {
		t.Parallel()
		got := cutAfter(t, api, "GET /healthz/live HTTP/1.1\r\nHost: x\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Fatalf("answered %q", got)
		}
	})
	t.Run("a body trickled one byte at a time", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", api)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
		stop := make(chan struct{})
		defer close(stop)
		go func() { // a byte every 20 ms: each read succeeds, the body never ends in time
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte{'x'}); err != nil {
						return
					}
				}
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(safety))
		if _, err := io.ReadAll(conn); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a trickled body kept the connection open")
		}
	})
}

func TestTimeoutsSpareWaitsAndWebSockets(t *testing.T) {
	t.Parallel()

	t.Run("a handler may wait longer than the timeouts once its body is read", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		waits := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			select {
			case <-release:
			case <-r.Context().Done():
				http.Error(w, "cancelled", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write(body)
		})
		s := New(Options{BodyReadTimeout: shortTimeout})
		s.Router().Post("/", waits)
		addr := serveWithTimeouts(t, s)
		type answer struct {
			status int
			body   string
			err    error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := http.Post("http://"+addr, "text/plain", strings.NewReader("long wait"))
			if err != nil {
				done <- answer{err: err}
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			done <- answer{status: res.StatusCode, body: string(b)}
		}()
		// A stalled client on the same server being cut proves the
		// timeouts have passed while the handler waits, like an RPC call.
		cutAfter(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
		close(release)
		if a := <-done; a.err != nil || a.status != http.StatusOK || a.body != "long wait" {
			t.Fatalf("waiting handler: %+v", a)
		}
	})

	t.Run("a WebSocket idle longer than the timeouts stays open", func(t *testing.T) {
		t.Parallel()
		b := setupEveryRoute(t, shortBodies)
		addr := serveWithTimeouts(t, b.server)
		token, id := b.register(t, "idle-socket@example.com")
		res := b.do(t, http.MethodPost, "/v1/ws/ticket", nil, token)
		conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/v1/ws?ticket="+res.body["ticket"].(string), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cutAfter(t, addr, "GET /healthz/live HTTP/1.1\r\nHost: x\r\n")
		cutAfter(t, addr, "POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
		ev := b.do(t, http.MethodPost, "/v1/events", map[string]any{"to": id, "event": "still-there", "payload": 1}, token)
		if ev.status != http.StatusAccepted {
			t.Fatalf("publish: %d %s", ev.status, ev.raw)
		}
		_ = conn.SetReadDeadline(time.Now().Add(safety))
		var f realtime.Frame
		if err := conn.ReadJSON(&f); err != nil || f.Event != "still-there" || !bytes.Equal(f.Payload, []byte("1")) {
			t.Fatalf("the idle socket: %v %+v", err, f)
		}
	})
}
