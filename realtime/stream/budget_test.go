package stream_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

// frameSize is what a read's budget counts for an event of s.
func frameSize(s string, e stream.Event) int {
	return len(e.Payload) + len(e.Event) + len(s) + stream.FrameOverhead
}

// big is an event of about 10 KB for s.
func big(s string) stream.Event {
	return stream.Event{Stream: s, Event: "big", Payload: []byte(`"` + strings.Repeat("x", 10_000) + `"`)}
}

func TestReadStopsAtItsByteBudget(t *testing.T) {
	t.Parallel()
	// setup stores 5 big events in each of two streams.
	setup := func(t *testing.T) (tx db.DB, a, b string, one int) {
		tx = dbtest.NewTx(t)
		a, b = roomStream(), roomStream()
		for range 5 {
			mustAppend(t, tx, big(a), big(b))
		}
		return tx, a, b, frameSize(a, big(a))
	}

	t.Run("the budget is shared by the streams in cursor order", func(t *testing.T) {
		t.Parallel()
		tx, a, b, one := setup(t)
		hs, err := stream.ReadMany(ctx, tx, []stream.Cursor{{Stream: a}, {Stream: b}}, stream.Limit{Bytes: 3*one + 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(hs[0].Events) != 3 || hs[0].Next() != 3 || !hs[0].More() {
			t.Fatalf("first stream: %d events, next %d", len(hs[0].Events), hs[0].Next())
		}
		if len(hs[1].Events) != 0 || hs[1].Last != 5 || hs[1].Epoch == "" || !hs[1].More() {
			t.Fatalf("second stream past the budget: %d events, last %d, epoch %q", len(hs[1].Events), hs[1].Last, hs[1].Epoch)
		}
	})

	t.Run("one event over the budget is still read, alone", func(t *testing.T) {
		t.Parallel()
		tx, a, _, _ := setup(t)
		h, err := stream.Read(ctx, tx, a, 2, stream.Limit{Bytes: 64 << 10 / 16})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Events) != 1 || h.Events[0].Offset != 3 || len(h.Events[0].Payload) != len(big(a).Payload) {
			t.Fatalf("%d events", len(h.Events))
		}
	})

	t.Run("paging on from Next reads everything once, in order", func(t *testing.T) {
		t.Parallel()
		tx, _, b, one := setup(t)
		var since int64
		for pages := 1; ; pages++ {
			h, err := stream.Read(ctx, tx, b, since, stream.Limit{Bytes: 2 * one})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range h.Events {
				if e.Offset != since+1 {
					t.Fatalf("offset %d after %d", e.Offset, since)
				}
				since = e.Offset
			}
			if !h.More() {
				if since != 5 || pages != 3 {
					t.Fatalf("%d events in %d pages", since, pages)
				}
				return
			}
		}
	})
}
