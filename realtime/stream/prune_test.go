package stream_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

func mustPrune(t testing.TB, q db.DB, r stream.Retention) stream.PruneResult {
	t.Helper()
	res, err := stream.Prune(ctx, q, r)
	if err != nil {
		t.Fatalf("prune: %v", err)
	}
	return res
}

// appendAt appends n events to s that happened at ts.
func appendAt(t *testing.T, q db.DB, s string, n int, ts time.Time) {
	t.Helper()
	evs := make([]stream.Event, n)
	for i := range evs {
		evs[i] = stream.Event{Stream: s, Event: fmt.Sprintf("at-%d", i), TS: ts}
	}
	mustAppend(t, q, evs...)
}

// checkRetained checks a stream holds exactly oldest..last, contiguous, and
// that its head says so.
func checkRetained(t *testing.T, q db.DB, s string, oldest, last int64) stream.History {
	t.Helper()
	h := mustRead(t, q, s, 0, 100000)
	if h.Oldest != oldest || h.Last != last {
		t.Fatalf("%s: head says %d..%d, want %d..%d", s, h.Oldest, h.Last, oldest, last)
	}
	if int64(len(h.Events)) != last-oldest+1 {
		t.Fatalf("%s: %d events retained, want %d", s, len(h.Events), last-oldest+1)
	}
	for i, e := range h.Events {
		if e.Offset != oldest+int64(i) {
			t.Fatalf("%s: event %d has offset %d, want %d", s, i, e.Offset, oldest+int64(i))
		}
	}
	var stored int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM stream_events e JOIN stream_heads h ON h.id = e.stream_id
		WHERE h.stream = $1`, s).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != last-oldest+1 {
		t.Fatalf("%s: %d rows stored (some hidden below the oldest offset), want %d", s, stored, last-oldest+1)
	}
	return h
}

func TestPrune(t *testing.T) {
	t.Parallel()

	t.Run("by count: keeps each stream's last MaxEvents", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		long, short := roomStream(), userStream()
		ps := appendN(t, tx, long, 25)
		appendN(t, tx, short, 5)
		res := mustPrune(t, tx, stream.Retention{MaxEvents: 10})
		if res.Deleted != 15 {
			t.Fatalf("deleted %d, want 15 (%+v)", res.Deleted, res)
		}
		h := checkRetained(t, tx, long, 16, 25)
		checkRetained(t, tx, short, 1, 5)
		if h.Recovered(ps[0].Epoch, 14) || !h.Recovered(ps[0].Epoch, 15) {
			t.Fatalf("after pruning to 16..25: Recovered(14)=%v Recovered(15)=%v", h.Recovered(ps[0].Epoch, 14), h.Recovered(ps[0].Epoch, 15))
		}
		if h := mustRead(t, tx, long, 3, 2); len(h.Events) != 2 || h.Events[0].Offset != 16 {
			t.Fatalf("a read from before the oldest starts at %+v", h.Events)
		}
	})

	t.Run("by age: drops events older than MaxAge, and empties a stream entirely", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		mixed, stale := roomStream(), roomStream()
		old := time.Now().Add(-48 * time.Hour)
		appendAt(t, tx, mixed, 5, old)
		appendAt(t, tx, mixed, 3, time.Now())
		appendAt(t, tx, stale, 4, old)
		if res := mustPrune(t, tx, stream.Retention{}); res.Deleted != 9 {
			t.Fatalf("deleted %d, want 9", res.Deleted)
		}
		checkRetained(t, tx, mixed, 6, 8)
		checkRetained(t, tx, stale, 5, 4)

		// An emptied stream fills again and ages out again.
		appendAt(t, tx, stale, 2, old)
		if res := mustPrune(t, tx, stream.Retention{}); res.Deleted != 2 {
			t.Fatalf("second prune deleted %d, want 2", res.Deleted)
		}
		checkRetained(t, tx, stale, 7, 6)
		appendN(t, tx, stale, 1)
		checkRetained(t, tx, stale, 7, 7)
	})

	t.Run("negative limits mean the defaults, not delete everything", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		s := roomStream()
		appendN(t, tx, s, 3)
		res := mustPrune(t, tx, stream.Retention{MaxEvents: -5, MaxAge: -time.Hour, Batch: -1, MaxDeletePerStream: -1})
		if res.Deleted != 0 {
			t.Fatalf("deleted %d", res.Deleted)
		}
		checkRetained(t, tx, s, 1, 3)
	})

	t.Run("MaxDeletePerStream spreads a big prune over passes", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		s := roomStream()
		appendN(t, tx, s, 25)
		res := mustPrune(t, tx, stream.Retention{MaxEvents: 10, MaxDeletePerStream: 4})
		if res.Deleted != 15 || res.Passes != 4 {
			t.Fatalf("result %+v, want 15 deleted in 4 passes", res)
		}
		checkRetained(t, tx, s, 16, 25)
	})

	t.Run("visits only streams with something to prune", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		a, b := roomStream(), roomStream()
		appendN(t, tx, a, 12)
		appendN(t, tx, b, 3)
		r := stream.Retention{MaxEvents: 10}
		if res := mustPrune(t, tx, r); res.Streams != 2 || res.Deleted != 2 {
			t.Fatalf("first prune (new streams are checked once) %+v", res)
		}
		if res := mustPrune(t, tx, r); res.Streams != 0 {
			t.Fatalf("nothing appended, yet %d streams visited", res.Streams)
		}
		appendN(t, tx, b, 7) // b reaches 10: still within the limit
		if res := mustPrune(t, tx, r); res.Streams != 0 {
			t.Fatalf("b within the limit, yet %d streams visited", res.Streams)
		}
		appendN(t, tx, b, 1)
		if res := mustPrune(t, tx, r); res.Streams != 1 || res.Deleted != 1 {
			t.Fatalf("b over the limit by one: %+v", res)
		}
		checkRetained(t, tx, a, 3, 12)
		checkRetained(t, tx, b, 2, 11)
	})
}

// TestPruneWhileAppending prunes in a loop while appenders write: every
// stream ends holding exactly its head's oldest..last, no rows hidden below
// the oldest offset and none missing above it.
func TestPruneWhileAppending(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	streams := []string{roomStream(), roomStream(), userStream()}
	r := stream.Retention{MaxEvents: 20, MaxDeletePerStream: 7, Batch: 2}

	var wg sync.WaitGroup
	for a := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				batch := []stream.Event{ev(streams[(a+i)%3], "x"), ev(streams[(a+i+1)%3], "y")}
				if _, err := stream.Append(ctx, pool, batch); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var prunes int
	for running := true; running; prunes++ {
		select {
		case <-done:
			running = false
		default:
		}
		mustPrune(t, pool, r)
	}
	mustPrune(t, pool, r)
	var total int64
	for _, s := range streams {
		h := mustRead(t, pool, s, 0, 0)
		total += h.Last
		checkRetained(t, pool, s, h.Last-19, h.Last)
	}
	if total != 6*40*2 {
		t.Fatalf("heads count %d events, %d were appended", total, 6*40*2)
	}
	// Each head's oldest_ts is its oldest event's: age pruning relies on it.
	var wrong int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM stream_heads h WHERE h.oldest_ts IS DISTINCT FROM
		(SELECT e.ts FROM stream_events e WHERE e.stream_id = h.id AND e.stream_offset = h.oldest_offset)`).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 {
		t.Fatalf("%d heads record a wrong oldest_ts", wrong)
	}
	t.Logf("%d prunes while appending", prunes)
}

func TestReset(t *testing.T) {
	t.Parallel()
	tx := dbtest.NewTx(t)
	s := userStream()
	ps := appendN(t, tx, s, 3)
	if err := stream.Reset(ctx, tx, s); err != nil {
		t.Fatal(err)
	}
	h := mustRead(t, tx, s, 0, 0)
	if h.Epoch != "" || h.Last != 0 || len(h.Events) != 0 || h.Recovered(ps[0].Epoch, 3) {
		t.Fatalf("after reset %+v", h)
	}
	again := appendN(t, tx, s, 1)
	if again[0].Offset != 1 || again[0].Epoch == ps[0].Epoch {
		t.Fatalf("after reset an append got %+v, want offset 1 of a new epoch (old %s)", again[0], ps[0].Epoch)
	}
	h = mustRead(t, tx, s, 0, 0)
	if h.Recovered(ps[0].Epoch, 1) || !h.Recovered(again[0].Epoch, 0) {
		t.Fatalf("old epoch must not recover, the new one must: %+v", h)
	}
	var rows int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM stream_events e WHERE NOT EXISTS
		(SELECT 1 FROM stream_heads h WHERE h.id = e.stream_id)`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d events outlived their head (%v)", rows, err)
	}
	if err := stream.Reset(ctx, tx, roomStream()); err != nil {
		t.Fatalf("reset of an unknown stream: %v", err)
	}
}

// TestResetWhileAppending resets a stream over and over while appenders
// write to it: no event may outlive its head (stored, unreachable, never
// pruned) and the surviving head holds exactly its events.
func TestResetWhileAppending(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	s := roomStream()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := stream.Append(ctx, pool, []stream.Event{ev(s, "x"), ev(s, "y")}); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if err := stream.Reset(ctx, pool, s); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, pool, ev(s, "last"))
	var orphans int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM stream_events e WHERE NOT EXISTS
		(SELECT 1 FROM stream_heads h WHERE h.id = e.stream_id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Fatalf("%d events outlived their head", orphans)
	}
	h := mustRead(t, pool, s, 0, 0)
	checkRetained(t, pool, s, 1, h.Last)
}
