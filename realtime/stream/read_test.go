package stream_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

func appendN(t *testing.T, q db.DB, s string, n int) []stream.Position {
	t.Helper()
	evs := make([]stream.Event, n)
	for i := range evs {
		evs[i] = ev(s, fmt.Sprintf("e%d", i+1))
	}
	return mustAppend(t, q, evs...)
}

func TestRead(t *testing.T) {
	t.Parallel()

	t.Run("events after since, in order, limited, with paging", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		s := roomStream()
		ps := appendN(t, tx, s, 7)
		h := mustRead(t, tx, s, 2, 3)
		if h.Epoch != ps[0].Epoch || h.Oldest != 1 || h.Last != 7 || h.Since != 2 {
			t.Fatalf("history %+v", h)
		}
		if len(h.Events) != 3 || h.Events[0].Offset != 3 || h.Events[2].Offset != 5 || h.Events[0].Event != "e3" {
			t.Fatalf("events %+v", h.Events)
		}
		if !h.More() || h.Next() != 5 {
			t.Fatalf("More %v Next %d after 3..5 of 7", h.More(), h.Next())
		}
		h = mustRead(t, tx, s, h.Next(), 3)
		if len(h.Events) != 2 || h.Events[1].Offset != 7 || h.More() || h.Next() != 7 {
			t.Fatalf("second page %+v", h)
		}
		if h = mustRead(t, tx, s, 7, 0); len(h.Events) != 0 || h.More() || h.Next() != 7 {
			t.Fatalf("read at the head %+v", h)
		}
	})

	t.Run("an unknown stream is empty with no epoch", func(t *testing.T) {
		t.Parallel()
		h := mustRead(t, dbtest.NewTx(t), userStream(), 0, 0)
		if h.Epoch != "" || h.Last != 0 || h.Oldest != 1 || len(h.Events) != 0 || h.More() {
			t.Fatalf("unknown stream %+v", h)
		}
	})

	t.Run("a negative offset or limit is refused", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		if _, err := stream.Read(ctx, tx, userStream(), -1, stream.Limit{}); !errors.Is(err, stream.ErrInvalid) {
			t.Fatalf("since -1: %v", err)
		}
		if _, err := stream.Read(ctx, tx, userStream(), 0, stream.Limit{Events: -1}); !errors.Is(err, stream.ErrInvalid) {
			t.Fatalf("limit -1: %v", err)
		}
	})

	t.Run("ReadMany reads many streams in one query, in cursor order", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		a, b, unknown := userStream(), roomStream(), roomStream()
		appendN(t, tx, a, 4)
		appendN(t, tx, b, 2)
		hs, err := stream.ReadMany(ctx, tx, []stream.Cursor{{Stream: b, Since: 1}, {Stream: unknown}, {Stream: a, Since: 0}}, stream.Limit{Events: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 3 || hs[0].Stream != b || hs[1].Stream != unknown || hs[2].Stream != a {
			t.Fatalf("histories %+v", hs)
		}
		if len(hs[0].Events) != 1 || hs[0].Events[0].Offset != 2 || hs[0].Events[0].Stream != b {
			t.Fatalf("%s: %+v", b, hs[0].Events)
		}
		if hs[1].Epoch != "" || len(hs[1].Events) != 0 {
			t.Fatalf("unknown: %+v", hs[1])
		}
		if len(hs[2].Events) != 3 || !hs[2].More() || hs[2].Events[2].Offset != 3 {
			t.Fatalf("%s: limit per stream not applied: %+v", a, hs[2])
		}
		if hs, err = stream.ReadMany(ctx, tx, nil, stream.Limit{}); err != nil || len(hs) != 0 {
			t.Fatalf("no cursors: %v %v", hs, err)
		}
	})
}

// TestRecovered is the rule a caller answers `recovered` with.
func TestRecovered(t *testing.T) {
	t.Parallel()
	h := stream.History{Epoch: "e1", Oldest: 11, Last: 20}
	empty := stream.History{Oldest: 1}
	for _, c := range []struct {
		name  string
		h     stream.History
		epoch string
		since int64
		want  bool
	}{
		{"at the oldest retained offset's predecessor", h, "e1", 10, true},
		{"inside retained history", h, "e1", 15, true},
		{"at the head", h, "e1", 20, true},
		{"older than retained history", h, "e1", 9, false},
		{"another epoch", h, "e0", 15, false},
		{"beyond the head (history lost)", h, "e1", 21, false},
		{"a newcomer to a stream whose start was pruned", h, "", 0, false},
		{"a newcomer to an unpruned stream", stream.History{Epoch: "e1", Oldest: 1, Last: 5}, "", 0, true},
		{"a newcomer to a stream never written", empty, "", 0, true},
		{"a position in a stream since reset", empty, "e1", 3, false},
		{"an epoch since reset, at 0", empty, "e1", 0, false},
		{"a negative position", h, "e1", -1, false},
	} {
		if got := c.h.Recovered(c.epoch, c.since); got != c.want {
			t.Errorf("%s: Recovered(%q, %d) = %v, want %v", c.name, c.epoch, c.since, got, c.want)
		}
	}
}
