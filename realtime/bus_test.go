package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

func TestBusAcrossNodes(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b := startNode(t, dbURL, HubOptions{}), startNode(t, dbURL, HubOptions{})
	ctx := context.Background()

	// Targeted subtests run in parallel; the broadcast runs after them, as
	// it reaches every socket.
	t.Run("targeted", func(t *testing.T) {
		t.Run("user and room", func(t *testing.T) {
			t.Parallel()
			user := uuid.NewString()
			onA, onB := dial(t, a, user), dial(t, b, user)
			if err := a.bus.PublishUser(ctx, user, "hello", map[string]int{"n": 1}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*wsClient{onA, onB} {
				if f := c.expect(t, "hello"); string(f.Payload) != `{"n":1}` || f.To != user {
					t.Fatalf("frame %+v", f)
				}
			}
			onB.send(t, Frame{Event: "room.join", Room: "r-" + user})
			onB.expect(t, EventRoomJoined)
			if err := a.bus.PublishRoom(ctx, "r-"+user, "news", "x"); err != nil {
				t.Fatal(err)
			}
			if f := onB.expect(t, "news"); f.Room != "r-"+user {
				t.Fatalf("frame %+v", f)
			}
		})

		// Not parallel: it checks A's spill counter did not move, which the
		// ephemeral sibling below moves on purpose (parallel subtests wait
		// until the serial ones are done).
		t.Run("a stored payload over 8000 bytes crosses through its stream", func(t *testing.T) {
			user := uuid.NewString()
			c := dial(t, b, user)
			big := `"` + strings.Repeat("é", 10000) + `"` // 20002 bytes, 10002 runes
			before, reads := counterValue(a.bus.metrics.spilled), counterValue(b.hub.metrics.reads)
			if err := a.bus.PublishUser(ctx, user, "big", json.RawMessage(big)); err != nil {
				t.Fatal(err)
			}
			if f := c.expect(t, "big"); string(f.Payload) != big || f.Offset != 1 || f.Stream != "user:"+user {
				t.Fatalf("payload of %d bytes arrived as %d bytes (frame at %s/%d)", len(big), len(f.Payload), f.Stream, f.Offset)
			}
			if counterValue(a.bus.metrics.spilled) != before || counterValue(b.hub.metrics.reads) <= reads {
				t.Fatal("a stored event took the spill table, or B did not read it from the stream")
			}
		})

		t.Run("an ephemeral payload over 8000 bytes crosses through the spill table", func(t *testing.T) {
			t.Parallel()
			user := uuid.NewString()
			c := dial(t, b, user)
			big := `"` + strings.Repeat("é", 10000) + `"`
			before := counterValue(a.bus.metrics.spilled)
			if err := a.bus.PublishUser(ctx, user, "typing", json.RawMessage(big)); err != nil {
				t.Fatal(err)
			}
			if f := c.expect(t, "typing"); string(f.Payload) != big || f.Stream != "" {
				t.Fatalf("payload of %d bytes arrived as %d bytes (stream %q)", len(big), len(f.Payload), f.Stream)
			}
			// The sender counts after its statement returns, which may be
			// after the receiver has the message.
			testwait.For(t, 5*time.Second, "the message to be counted through the spill table", func() bool {
				return counterValue(a.bus.metrics.spilled) > before
			})
			if n, err := DeleteSpilled(ctx, a.pool, 0); err != nil || n < 1 {
				t.Fatalf("DeleteSpilled = %d, %v", n, err)
			}
		})

		t.Run("many events in one batch all arrive, in order", func(t *testing.T) {
			t.Parallel()
			user := uuid.NewString()
			c := dial(t, b, user)
			const n = 300
			for i := range n {
				// Identical payloads too: Postgres folds identical notifications of one transaction.
				if err := a.bus.PublishUser(ctx, user, "same", i/100); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				f := c.expect(t, "same")
				if want := itoa(i / 100); string(f.Payload) != want {
					t.Fatalf("frame %d payload %s, want %s", i, f.Payload, want)
				}
			}
		})
	})

	t.Run("everyone", func(t *testing.T) {
		user := uuid.NewString()
		onA, onB := dial(t, a, user), dial(t, b, uuid.NewString())
		// A publish to nobody in particular reaches everyone, here and there.
		if err := b.bus.Publish(ctx, Event{Event: "all-" + user}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*wsClient{onA, onB} {
			c.expect(t, "all-"+user)
		}
	})
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestRPC(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b := startNode(t, dbURL, HubOptions{}), startNode(t, dbURL, HubOptions{})
	ctx := context.Background()

	for _, tc := range []struct {
		name   string
		caller *node
	}{{"same node", b}, {"other node", a}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			user := uuid.NewString()
			c := dial(t, b, user)
			type result struct {
				res json.RawMessage
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := tc.caller.bus.CallClient(ctx, user, "ping", json.RawMessage(`[1,2]`), 5*time.Second)
				done <- result{res, err}
			}()
			f := c.expect(t, EventRPCCall)
			var p struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			_ = json.Unmarshal(f.Payload, &p)
			c.send(t, Frame{Event: "rpc.result", ID: f.ID, Payload: json.RawMessage(`{"echo":"` + p.Method + `","params":` + string(p.Params) + `}`)})
			if r := <-done; r.err != nil || string(r.res) != `{"echo":"ping","params":[1,2]}` {
				t.Fatalf("Call = %s, %v", r.res, r.err)
			}
		})
	}

	t.Run("no answer times out; the late answer is refused", func(t *testing.T) {
		t.Parallel()
		user := uuid.NewString()
		c := dial(t, b, user)
		_, err := a.bus.CallClient(ctx, user, "slow", nil, 300*time.Millisecond)
		if !errors.Is(err, ErrRPCTimeout) {
			t.Fatalf("Call = %v, want ErrRPCTimeout", err)
		}
		f := c.expect(t, EventRPCCall)
		if string(f.Payload) != `{"method":"slow","params":null}` {
			t.Fatalf("call payload %s", f.Payload)
		}
		c.send(t, Frame{Event: "rpc.result", ID: f.ID, Payload: json.RawMessage(`1`)})
		c.expect(t, EventError)
	})

	t.Run("user connected nowhere", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		_, err := a.bus.CallClient(ctx, uuid.NewString(), "x", nil, 5*time.Second)
		if !errors.Is(err, ErrNotConnected) {
			t.Fatalf("Call = %v, want ErrNotConnected", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %s", d)
		}
	})

	t.Run("only the called user may answer", func(t *testing.T) {
		t.Parallel()
		user, other := uuid.NewString(), uuid.NewString()
		c, o := dial(t, b, user), dial(t, b, other)
		done := make(chan error, 1)
		go func() {
			_, err := a.bus.CallClient(ctx, user, "x", nil, 2*time.Second)
			done <- err
		}()
		f := c.expect(t, EventRPCCall)
		o.send(t, Frame{Event: "rpc.result", ID: f.ID, Payload: json.RawMessage(`"forged"`)})
		o.expect(t, EventError)
		c.send(t, Frame{Event: "rpc.result", ID: f.ID, Payload: json.RawMessage(`"real"`)})
		if err := <-done; err != nil {
			t.Fatalf("Call = %v", err)
		}
	})
}

func TestListenReconnects(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b := startNode(t, dbURL, HubOptions{}), startNode(t, dbURL, HubOptions{})
	ctx := context.Background()
	user := uuid.NewString()
	c := dial(t, b, user)
	if err := b.bus.Ready(ctx); err != nil {
		t.Fatalf("not ready at start: %v", err)
	}
	// Kill b's LISTEN backend until readiness is seen failing.
	sawDown := false
	deadline := time.Now().Add(15 * time.Second)
	for !sawDown {
		if time.Now().After(deadline) {
			t.Fatal("readiness never failed")
		}
		_, _ = a.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, b.bus.ListenApplicationName())
		for range 20 {
			if err := b.bus.Ready(ctx); err != nil {
				sawDown = true
				if !strings.Contains(err.Error(), "LISTEN") {
					t.Fatalf("reason %q does not name LISTEN", err)
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	testwait.For(t, 10*time.Second, "readiness back", func() bool { return b.bus.Ready(ctx) == nil })
	if counterValue(b.bus.metrics.reconnects) < 1 {
		t.Fatal("reconnect not counted")
	}
	if err := a.bus.PublishUser(ctx, user, "after", nil); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "after")
}
