package stream_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/migrations"
	"github.com/switchboard/switchboard/realtime/stream"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

var ctx = context.Background()

func userStream() string { return stream.UserStream(uuid.NewString()) }

func roomStream() string { return stream.RoomStream("room-" + uuid.NewString()[:8]) }

// ev is an event for s named name.
func ev(s, name string) stream.Event {
	return stream.Event{Stream: s, Event: name, Payload: []byte(`{"n":"` + name + `"}`)}
}

func mustAppend(t testing.TB, q db.DB, evs ...stream.Event) []stream.Position {
	t.Helper()
	ps, err := stream.Append(ctx, q, evs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return ps
}

func mustRead(t *testing.T, q db.DB, s string, since int64, limit int) stream.History {
	t.Helper()
	h, err := stream.Read(ctx, q, s, since, stream.Limit{Events: limit})
	if err != nil {
		t.Fatalf("read %s: %v", s, err)
	}
	return h
}

func TestAppend(t *testing.T) {
	t.Parallel()

	t.Run("numbers each stream from 1 in input order, one batch for many streams", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		a, b := userStream(), roomStream()
		ps := mustAppend(t, tx, ev(a, "a1"), ev(b, "b1"), ev(a, "a2"), ev(a, "a3"), ev(b, "b2"))
		want := []struct {
			stream string
			offset int64
		}{{a, 1}, {b, 1}, {a, 2}, {a, 3}, {b, 2}}
		for i, w := range want {
			if ps[i].Stream != w.stream || ps[i].Offset != w.offset {
				t.Fatalf("position %d = %s@%d, want %s@%d", i, ps[i].Stream, ps[i].Offset, w.stream, w.offset)
			}
		}
		if ps[0].Epoch == "" || ps[0].Epoch != ps[2].Epoch || ps[0].Epoch == ps[1].Epoch {
			t.Fatalf("epochs %q %q %q: want one non-empty epoch per stream", ps[0].Epoch, ps[2].Epoch, ps[1].Epoch)
		}
		ps2 := mustAppend(t, tx, ev(b, "b3"), ev(a, "a4"))
		if ps2[0].Offset != 3 || ps2[1].Offset != 4 || ps2[1].Epoch != ps[0].Epoch {
			t.Fatalf("second batch: %+v", ps2)
		}
	})

	t.Run("stores every field; payload compacted; TS to the microsecond or the database clock", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		s := userStream()
		id, from := uuid.NewString(), uuid.NewString()
		at := time.Date(2026, 1, 2, 3, 4, 5, 678912345, time.UTC)
		before := time.Now()
		ps := mustAppend(t, tx,
			stream.Event{Stream: s, Event: "dm", ID: id, From: from, Payload: []byte(`{ "a" : [1, 2] }`), TS: at},
			stream.Event{Stream: s, Event: "task.run.queued"})
		h := mustRead(t, tx, s, 0, 0)
		if len(h.Events) != 2 {
			t.Fatalf("read %d events, want 2", len(h.Events))
		}
		got := h.Events[0]
		if got.Event != "dm" || got.ID != id || got.From != from || string(got.Payload) != `{"a":[1,2]}` ||
			!got.TS.Equal(at.Truncate(time.Microsecond)) || got.Offset != 1 || got.Epoch != ps[0].Epoch || got.Stream != s {
			t.Fatalf("stored %+v", got)
		}
		if !ps[0].TS.Equal(got.TS) {
			t.Fatalf("position TS %v, stored %v", ps[0].TS, got.TS)
		}
		second := h.Events[1]
		if second.ID != "" || second.From != "" || second.Payload != nil {
			t.Fatalf("empty fields stored as %+v", second)
		}
		if second.TS.Before(before.Add(-time.Minute)) || !ps[1].TS.Equal(second.TS) {
			t.Fatalf("default TS %v (position %v)", second.TS, ps[1].TS)
		}
	})

	t.Run("an empty batch is no round trip and no error", func(t *testing.T) {
		t.Parallel()
		ps, err := stream.Append(ctx, nil, nil)
		if err != nil || ps != nil {
			t.Fatalf("Append(nil) = %v, %v", ps, err)
		}
	})

	t.Run("an invalid event fails the whole batch and stores nothing", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		good := userStream()
		bad := []stream.Event{
			{Stream: "user:not-a-uuid", Event: "x"},
			{Stream: "inbox:not-a-uuid", Event: "x"},
			{Stream: "room:", Event: "x"},
			{Stream: "elsewhere:x", Event: "x"},
			{Stream: "room:a\x00b", Event: "x"},
			{Stream: "room:" + string(make([]byte, 300)), Event: "x"},
			{Stream: good, Event: ""},
			{Stream: good, Event: "bad\xff"},
			{Stream: good, Event: "x", ID: "nope"},
			{Stream: good, Event: "x", From: "nope"},
			{Stream: good, Event: "x", Payload: []byte(`{"a":`)},
			{Stream: good, Event: "x", Payload: []byte("\"\xff\"")},
		}
		for _, b := range bad {
			_, err := stream.Append(ctx, tx, []stream.Event{ev(good, "fine"), b})
			if !errors.Is(err, stream.ErrInvalid) {
				t.Fatalf("append %+v: error %v, want ErrInvalid", b, err)
			}
		}
		if h := mustRead(t, tx, good, 0, 0); h.Last != 0 || len(h.Events) != 0 {
			t.Fatalf("a refused batch stored %d events", h.Last)
		}
	})

	t.Run("a rolled-back append leaves no gap", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		s := userStream()
		mustAppend(t, pool, ev(s, "one"))
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, tx, ev(s, "lost"), ev(s, "lost too"))
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if ps := mustAppend(t, pool, ev(s, "two")); ps[0].Offset != 2 {
			t.Fatalf("after a rollback the next offset is %d, want 2", ps[0].Offset)
		}
	})
}

// TestAppendCommitOrder shows the mechanism: a second append to a stream
// waits for the first one's commit before it takes an offset, so an offset
// can never become visible before a smaller one.
func TestAppendCommitOrder(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	s := roomStream()
	mustAppend(t, pool, ev(s, "warm"))

	first, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx) //nolint:errcheck
	if ps := mustAppend(t, first, ev(s, "first")); ps[0].Offset != 2 {
		t.Fatalf("first append got offset %d, want 2", ps[0].Offset)
	}
	second := make(chan stream.Position, 1)
	go func() {
		ps, err := stream.Append(ctx, pool, []stream.Event{ev(s, "second")})
		if err != nil {
			t.Errorf("second append: %v", err)
			close(second)
			return
		}
		second <- ps[0]
	}()
	testwait.For(t, 10*time.Second, "the second append to wait on the first's head lock", func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%stream_heads%'`).Scan(&n)
		return n == 1
	})
	if h := mustRead(t, pool, s, 1, 0); len(h.Events) != 0 || h.Last != 1 {
		t.Fatalf("before the first commits a reader sees %d events, last %d", len(h.Events), h.Last)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	p := <-second
	if p.Offset != 3 {
		t.Fatalf("second append got offset %d, want 3", p.Offset)
	}
	h := mustRead(t, pool, s, 1, 0)
	if len(h.Events) != 2 || h.Events[0].Event != "first" || h.Events[1].Event != "second" {
		t.Fatalf("after both commits: %+v", h.Events)
	}
}

// appendBatch appends on its own, or inside a transaction that goes on
// working for up to 2 ms before it commits (as a caller's transaction
// would): that widens the window in which an offset is taken but not yet
// visible, the window a sequence-based design loses events in.
func appendBatch(p *pgxpool.Pool, batch []stream.Event, inTx bool) error {
	if !inTx {
		_, err := stream.Append(ctx, p, batch)
		return err
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := stream.Append(ctx, tx, batch); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_sleep(0.002 * random())"); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// TestAppendGapFree is the proof under load: appenders on several pools
// (half of them inside longer transactions) append batches for overlapping
// streams (heads in random order, so a lock order bug would deadlock)
// while a reader on another pool follows every
// stream with Read(since) and check that each read continues exactly where
// the last one ended: no offset they passed ever appears, and none is
// skipped. At the end every appended event was read once, in order.
func TestAppendGapFree(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabaseURL(t)
	pools := make([]*pgxpool.Pool, 4)
	for i := range pools {
		p, err := db.Connect(ctx, url, db.Options{MaxConns: 6})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		pools[i] = p
	}
	streams := []string{userStream(), userStream(), roomStream(), roomStream(), roomStream()}
	const appenders, batches = 16, 60

	var wg sync.WaitGroup
	appended := make([]map[string]int, appenders) // per appender: events per stream
	for a := range appenders {
		appended[a] = map[string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(a), 1))
			for b := range batches {
				batch := make([]stream.Event, 1+r.IntN(8))
				for i := range batch {
					s := streams[r.IntN(len(streams))]
					batch[i] = ev(s, fmt.Sprintf("a%d-b%d-%d", a, b, i))
					appended[a][s]++
				}
				if err := appendBatch(pools[a%(len(pools)-1)], batch, a%2 == 1); err != nil {
					t.Errorf("appender %d: %v", a, err)
					return
				}
			}
		}()
	}
	defer wg.Wait() // a failing test still lets the appenders finish before the pools close
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	reader := pools[len(pools)-1]
	followed := map[string][]int64{} // offsets the follower read, in order
	position := func(s string) int64 {
		if o := followed[s]; len(o) > 0 {
			return o[len(o)-1]
		}
		return 0
	}
	follow := func() bool {
		cursors := make([]stream.Cursor, len(streams))
		for i, s := range streams {
			cursors[i] = stream.Cursor{Stream: s, Since: position(s)}
		}
		hs, err := stream.ReadMany(ctx, reader, cursors, stream.Limit{Events: 50})
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var got bool
		for _, h := range hs {
			for _, e := range h.Events {
				if e.Offset != position(h.Stream)+1 {
					t.Fatalf("%s: read offset %d right after %d: a gap", h.Stream, e.Offset, position(h.Stream))
				}
				followed[h.Stream] = append(followed[h.Stream], e.Offset)
				got = true
			}
		}
		return got
	}
	var reads int
	for running := true; running; reads++ {
		select {
		case <-done:
			running = false
		default:
		}
		follow()
	}
	for follow() { // drain what the last polls left
	}
	for _, s := range streams {
		checkFollowed(t, reader, s, followed[s])
		var want int
		for a := range appenders {
			want += appended[a][s]
		}
		if n := len(followed[s]); n != want {
			t.Fatalf("%s: the follower read %d events, %d were appended", s, n, want)
		}
	}
	t.Logf("%d reads while %d appenders appended %d batches each", reads, appenders, batches)
}

// checkFollowed compares what a follower read incrementally with the whole
// stream read afterwards: an offset stored but never read means it became
// visible after the follower had passed it.
func checkFollowed(t *testing.T, q db.DB, s string, followed []int64) {
	t.Helper()
	read := map[int64]bool{}
	for _, o := range followed {
		read[o] = true
	}
	for since := int64(0); ; {
		h := mustRead(t, q, s, since, 0)
		for _, e := range h.Events {
			if !read[e.Offset] {
				t.Fatalf("%s: offset %d became visible after the follower had passed it", s, e.Offset)
			}
		}
		if !h.More() {
			return
		}
		since = h.Next()
	}
}
