package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

// measuredStore is the Streams of a node, noting the most payload bytes
// one read of the hub brought.
type measuredStore struct {
	Streams
	mu  sync.Mutex
	max int
}

func (m *measuredStore) ReadMany(ctx context.Context, cursors []stream.Cursor, limit int) ([]stream.History, error) {
	hs, err := m.Streams.ReadMany(ctx, cursors, limit)
	n := 0
	for _, h := range hs {
		for _, ev := range h.Events {
			n += len(ev.Payload)
		}
	}
	m.mu.Lock()
	m.max = max(m.max, n)
	m.mu.Unlock()
	return hs, err
}

func (m *measuredStore) most() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// A resume naming rooms whose retained history is many times the read
// budget gets all of it, in order, then one resumed frame; no read of the
// store brings more than the budget (and one event).
func TestResumeReadsAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{})
	store := &measuredStore{Streams: Streams{DB: n.pool}}
	n.hub.opts.Store = store // before any socket: reads start after this
	const rooms, events, size = 4, 30, 60 << 10
	payload := []byte(`"` + strings.Repeat("x", size) + `"`)
	positions := map[string]position{}
	for r := range rooms {
		name := stream.RoomStream(fmt.Sprintf("big-%d-%s", r, uuid.NewString()))
		positions[name] = position{}
		for range events {
			if _, err := stream.Append(context.Background(), n.pool, []stream.Event{{Stream: name, Event: "big", Payload: payload}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := dial(t, n, uuid.NewString())
	body, _ := json.Marshal(map[string]any{"streams": positions})
	c.send(t, Frame{Event: "resume", Payload: body})
	last := map[string]int64{}
	for {
		f := c.next(t)
		if f.Event == EventRoomJoined {
			continue
		}
		if f.Event == EventResumed {
			for name, r := range resumedOf(t, f) {
				if _, named := positions[name]; !named {
					continue // the user's own streams, not resumed here
				}
				if !r.Recovered || r.Offset != events || last[name] != events {
					t.Fatalf("resumed %s: %+v after offset %d", name, r, last[name])
				}
			}
			break
		}
		if f.Offset != last[f.Stream]+1 {
			t.Fatalf("%s offset %d after %d", f.Stream, f.Offset, last[f.Stream])
		}
		last[f.Stream] = f.Offset
	}
	if got := store.most(); got > readBudget+size+2 {
		t.Fatalf("a read of %d payload bytes; the budget is %d", got, readBudget)
	}
}

// readBudget is the default byte budget of a read.
const readBudget = 1 << 20
