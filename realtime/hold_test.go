package realtime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// A new socket's user stream waits for the client's first frame; a first
// frame the hub refuses ends the wait as a handled one does.
func TestRefusedFirstFrameReleasesTheHold(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{MaxFrameBytes: 1024, hold: time.Hour})
	for name, frame := range map[string]string{
		"not JSON":  "not json",
		"too large": `{"event":"typing","payload":"` + strings.Repeat("x", 2048) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			user := uuid.NewString()
			c := dial(t, n, user)
			c.send(t, frame)
			c.expect(t, EventError)
			if err := n.bus.PublishUser(context.Background(), user, "note", map[string]int{"n": 1}); err != nil {
				t.Fatal(err)
			}
			if f := c.expect(t, "note"); f.Offset != 1 {
				t.Fatalf("note at offset %d, want 1", f.Offset)
			}
		})
	}
}
