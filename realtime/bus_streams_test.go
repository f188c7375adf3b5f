package realtime

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

// gatedStore appends to the real store once the test opens the gate.
type gatedStore struct {
	Streams
	entered chan struct{}
	gate    chan struct{}
}

func (g gatedStore) AppendStored(ctx context.Context, evs []stream.Event) ([]stream.Event, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.Streams.AppendStored(ctx, evs)
}

// Once a stored event is queued, its publisher gets the append's outcome
// even when its context ends first: an error then ("try again") while the
// event was stored made the retry a duplicate.
func TestPublishWaitsForTheAppendOnceQueued(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	g := gatedStore{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	n := startNode(t, dbURL, HubOptions{}, func(o *Options) {
		g.Streams = Streams{DB: o.Bus.Pool}
		o.Bus.Store = g
	})
	user := uuid.NewString()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- n.bus.PublishUser(ctx, user, "note", map[string]int{"n": 1}) }()
	<-g.entered // queued, and being appended
	cancel()
	close(g.gate)
	if err := <-res; err != nil {
		t.Fatalf("publish = %v, but the event is stored", err)
	}
	h, err := stream.Read(context.Background(), n.pool, stream.UserStream(user), 0, stream.Limit{})
	if err != nil || len(h.Events) != 1 {
		t.Fatalf("stored %d events (%v), want 1", len(h.Events), err)
	}
}
