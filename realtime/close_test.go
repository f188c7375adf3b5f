package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// TestCloseFramesArrive: a connection the server closes sends its close
// code and shuts down gracefully, so a client that is still writing gets
// no reset and reads the code (not 1006).
func TestCloseFramesArrive(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)

	t.Run("frame over the hard limit: 1009 while the client still writes it", func(t *testing.T) {
		t.Parallel()
		n := startNode(t, dbURL, HubOptions{MaxFrameBytes: 1024}) // hard limit 4 KiB
		user := uuid.NewString()
		conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		testwait.For(t, 10*time.Second, "connection registered", func() bool { return n.hub.hasUser(user) })
		// The server stops reading after the frame header; the other 8 MiB
		// must be absorbed, not answered with a reset.
		if err := conn.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 8<<20))); err != nil {
			t.Fatalf("writing the oversized frame: %v", err)
		}
		_, _, err = conn.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
			t.Fatalf("read ended with %v, want close 1009", err)
		}
	})

	t.Run("slow consumer: 3008 while the client keeps sending", func(t *testing.T) {
		t.Parallel()
		// A small linger budget: the client outsends it before it reads
		// the close, so the socket must stay open (unread) once it is spent.
		// WriteWait is how long the unread socket lingers: a loaded machine
		// may take more than the default 10 s to read up to the close.
		n := startNode(t, dbURL, HubOptions{SendBuffer: 16, lingerBytes: 64 << 10, WriteWait: 2 * time.Minute, Limits: FrameLimits{ConnRate: 1e6, ConnBurst: 1e6, UserRate: 1e6, UserBurst: 1e6, UserBytes: 1 << 30}})
		user := uuid.NewString()
		conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		testwait.For(t, 10*time.Second, "connection registered", func() bool { return n.hub.hasUser(user) })
		payload := json.RawMessage(`"` + strings.Repeat("x", 60000) + `"`)
		for counterValue(n.hub.metrics.slow) == 0 {
			for range 50 {
				// Ephemeral: stored events wait for a slow reader instead.
				if err := n.bus.PublishUser(context.Background(), user, "typing", payload); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The client sends while it catches up, as a busy client does; its
		// frames after the close must not turn into a reset.
		read := make(chan error, 1)
		go func() {
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					read <- err
					return
				}
			}
		}()
		typing := []byte(`{"event":"typing","to":"` + uuid.NewString() + `","payload":"` + strings.Repeat("y", 30000) + `"}`)
		var werr error
		for werr == nil {
			select {
			case err = <-read:
			default:
				werr = conn.WriteMessage(websocket.TextMessage, typing)
				continue
			}
			break
		}
		if err == nil {
			err = <-read
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != CloseSlowConsumer {
			t.Fatalf("read ended with %v (last write: %v), want close 3008", err, werr)
		}
	})

	t.Run("shutdown does not wait out a lingering close", func(t *testing.T) {
		t.Parallel()
		// A client that never answers the close: without a hard close of
		// the stragglers, shutdown would linger for WriteWait (an hour).
		n := startNode(t, dbURL, HubOptions{WriteWait: time.Hour})
		user := uuid.NewString()
		conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		testwait.For(t, 10*time.Second, "connection registered", func() bool { return n.hub.hasUser(user) })
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		done := make(chan struct{})
		go func() { n.hub.Shutdown(ctx); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Shutdown still waiting 30 s after its deadline")
		}
	})
}
