package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime/stream"
)

// What another user addresses to a user is stored in its inbox; what the
// user sends itself and what the server publishes for it, in its user
// stream. A socket follows both from the start, each held until its first
// frame, and resumes both, but only its own.
func TestInbox(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b := startNode(t, dbURL, HubOptions{}), startNode(t, dbURL, HubOptions{hold: time.Hour})

	t.Run("others' messages go to the inbox, the user's own and the server's to its stream", func(t *testing.T) {
		t.Parallel()
		user, other := uuid.NewString(), uuid.NewString()
		c := dial(t, a, user)
		sender := dial(t, b, other)
		sender.send(t, Frame{Event: "dm", To: user, Payload: json.RawMessage(`"from other"`)})
		f := c.expect(t, "dm")
		if f.Stream != stream.InboxStream(user) || f.Offset != 1 || f.From != other || f.To != user {
			t.Fatalf("dm from another user: %+v", f)
		}
		c.send(t, Frame{Event: "dm", To: user, Payload: json.RawMessage(`"to myself"`)})
		if f := c.expect(t, "dm"); f.Stream != stream.UserStream(user) || f.Offset != 1 || f.From != user {
			t.Fatalf("dm to oneself: %+v", f)
		}
		if err := a.bus.PublishUser(context.Background(), user, "note", 1); err != nil {
			t.Fatal(err)
		}
		if f := c.expect(t, "note"); f.Stream != stream.UserStream(user) || f.Offset != 2 || f.From != "" {
			t.Fatalf("the server's event: %+v", f)
		}
	})

	t.Run("the inbox is held until the first frame and resumed from its position", func(t *testing.T) {
		t.Parallel()
		user, other := uuid.NewString(), uuid.NewString()
		inbox := stream.InboxStream(user)
		sender := dial(t, a, other)
		sender.send(t, Frame{Event: "dm", To: user, Payload: json.RawMessage(`0`)})
		c := dial(t, b, user) // held: b's hold lasts an hour
		for i := 1; i <= 3; i++ {
			sender.send(t, Frame{Event: "dm", To: user, Payload: json.RawMessage(itoa(i))})
		}
		waitLast(t, a, inbox, 4)
		c.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{%q:{"offset":2,"epoch":%q}}}`, inbox, r0(t, a, inbox)))})
		expectStored(t, c, inbox, 3, 4)
		if r := resumedOf(t, c.next(t))[inbox]; !r.Recovered || r.Offset != 4 {
			t.Fatalf("resumed %+v", r)
		}
		sender.send(t, Frame{Event: "dm", To: user, Payload: json.RawMessage(`5`)})
		expectStored(t, c, inbox, 5, 5)
	})

	t.Run("a resume naming nothing learns where every followed stream starts", func(t *testing.T) {
		t.Parallel()
		user, other := uuid.NewString(), uuid.NewString()
		inbox := stream.InboxStream(user)
		sender := dial(t, a, other)
		sender.send(t, Frame{Event: "dm", To: user, Payload: json.RawMessage(`1`)})
		sender.send(t, Frame{Event: "dm", To: user, Payload: json.RawMessage(`2`)})
		waitLast(t, a, inbox, 2)
		c := dial(t, b, user)
		c.send(t, Frame{Event: "resume", Payload: json.RawMessage(`{"streams":{}}`)})
		got := resumedOf(t, c.next(t))
		if r := got[inbox]; !r.Recovered || r.Offset != 2 || r.Epoch != r0(t, a, inbox) {
			t.Fatalf("the inbox in resumed: %+v (all: %+v)", r, got)
		}
		if r, ok := got[stream.UserStream(user)]; !ok || !r.Recovered || r.Offset != 0 {
			t.Fatalf("the user stream in resumed: %+v (all: %+v)", r, got)
		}
		// Away, then back from that position: what came meanwhile arrives.
		_ = c.conn.Close()
		sender.send(t, Frame{Event: "dm", To: user, Payload: json.RawMessage(`3`)})
		waitLast(t, a, inbox, 3)
		c = dial(t, a, user)
		c.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{%q:{"offset":2,"epoch":%q}}}`, inbox, r0(t, a, inbox)))})
		expectStored(t, c, inbox, 3, 3)
	})

	t.Run("another user's inbox is refused", func(t *testing.T) {
		t.Parallel()
		c := dial(t, a, uuid.NewString())
		c.send(t, Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{"inbox:%s":{"offset":0}}}`, uuid.NewString()))})
		if f := c.expect(t, EventError); !strings.Contains(string(f.Payload), "own inbox stream") {
			t.Fatalf("error %s", f.Payload)
		}
	})
}

// waitLast waits until name's last offset is last.
func waitLast(t *testing.T, n *node, name string, last int64) {
	t.Helper()
	testwait.For(t, 10*time.Second, fmt.Sprintf("%s at offset %d", name, last), func() bool {
		h, err := stream.Read(context.Background(), n.pool, name, 0, stream.Limit{Events: 1})
		return err == nil && h.Last >= last
	})
}
