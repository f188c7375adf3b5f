package stream_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

// Benchmarks print figures; run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./realtime/stream/
//
// (the Prune benchmarks build tables of 100 000 and 1 000 000 events first).

// benchPayload is a typical small message payload (about 60 bytes).
var benchPayload = []byte(`{"text":"see you at the standup in five minutes","n":42}`)

func benchEvents(streams []string, n, from int) []stream.Event {
	evs := make([]stream.Event, n)
	for i := range evs {
		evs[i] = stream.Event{
			Stream: streams[(from+i)%len(streams)], Event: "dm", ID: uuid.NewString(),
			From: "5f0c3c8e-9f53-4c53-9a59-0f1f0e1a6b11", Payload: benchPayload,
		}
	}
	return evs
}

func benchStreams(prefix string, n int) []string {
	ss := make([]string, n)
	for i := range ss {
		ss[i] = stream.RoomStream(fmt.Sprintf("%s-%d", prefix, i))
	}
	return ss
}

func fill(b *testing.B, pool *pgxpool.Pool, streams []string, n int) {
	b.Helper()
	for done := 0; done < n; done += 100 {
		if _, err := stream.Append(ctx, pool, benchEvents(streams, min(100, n-done), done)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend: events/s of one appender sending single events or
// batches of 100 (spread over 50 streams), each batch one round trip and
// one commit.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			pool := dbtest.NewPool(b)
			streams := benchStreams("append", 50)
			var n int
			for b.Loop() {
				if _, err := stream.Append(ctx, pool, benchEvents(streams, size, n)); err != nil {
					b.Fatal(err)
				}
				n += size
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkStorage: bytes per stored event (table, indexes and TOAST over
// rows) for 100 000 events of a ~60-byte payload over 1 000 streams.
func BenchmarkStorage(b *testing.B) {
	for b.Loop() {
		pool := dbtest.NewPool(b)
		fill(b, pool, benchStreams("storage", 1000), 100_000)
		var perEvent float64
		if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('stream_events')::float8 / count(*)
			FROM stream_events`).Scan(&perEvent); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(perEvent, "bytes/event")
		b.ReportMetric(float64(len(benchPayload)), "payload-bytes")
	}
}

// BenchmarkReadMissed: reading 1 000 missed events, from one stream (a
// client resuming) and as 10 from each of 100 streams in one ReadMany (a
// replica catching up after a LISTEN gap); p50 and p99 over 200 reads.
func BenchmarkReadMissed(b *testing.B) {
	pool := dbtest.NewPool(b)
	one := benchStreams("read-one", 1)
	fill(b, pool, one, 2000)
	many := benchStreams("read-many", 100)
	fill(b, pool, many, 2000)
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE stream_events"); err != nil {
		b.Fatal(err)
	}
	b.Run("one-stream", func(b *testing.B) {
		measureReads(b, func() int {
			h, err := stream.Read(ctx, pool, one[0], 1000, stream.Limit{Events: 1000})
			if err != nil {
				b.Fatal(err)
			}
			return len(h.Events)
		})
	})
	b.Run("100-streams", func(b *testing.B) {
		cursors := make([]stream.Cursor, len(many))
		for i, s := range many {
			cursors[i] = stream.Cursor{Stream: s, Since: 10}
		}
		measureReads(b, func() int {
			hs, err := stream.ReadMany(ctx, pool, cursors, stream.Limit{Events: 10})
			if err != nil {
				b.Fatal(err)
			}
			var n int
			for _, h := range hs {
				n += len(h.Events)
			}
			return n
		})
	})
}

func measureReads(b *testing.B, read func() int) {
	for b.Loop() {
		ds := make([]time.Duration, 200)
		for i := range ds {
			start := time.Now()
			if n := read(); n != 1000 {
				b.Fatalf("read %d events, want 1000", n)
			}
			ds[i] = time.Since(start)
		}
		slices.Sort(ds)
		b.ReportMetric(ms(ds[len(ds)/2]), "p50-ms")
		b.ReportMetric(ms(ds[len(ds)*99/100]), "p99-ms")
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkPrune: one Prune deleting 10 000 events (200 over the limit in
// each of 50 streams) from a table of 100 000 and of 1 000 000 retained
// events (idle streams at their 1 000-event limit), beside a naive
// set-based delete doing the same work, whose cost grows with the table.
func BenchmarkPrune(b *testing.B) {
	for _, idle := range []int{100, 1000} {
		b.Run(fmt.Sprintf("rows=%d", idle*1000), func(b *testing.B) {
			pool := dbtest.NewPool(b)
			fillIdle(b, pool, idle)
			hot := benchStreams("hot", 50)
			fill(b, pool, hot, 50*1000)
			mustPrune(b, pool, stream.Retention{}) // hot streams start at their limit
			for _, how := range []string{"heads", "naive"} {
				b.Run(how, func(b *testing.B) {
					var deleted int64
					for b.Loop() {
						b.StopTimer()
						fill(b, pool, hot, 50*200)
						b.StartTimer()
						deleted += prune(b, pool, how)
					}
					b.ReportMetric(float64(deleted)/float64(b.N), "deleted/op")
				})
			}
		})
	}
}

func prune(b *testing.B, pool *pgxpool.Pool, how string) int64 {
	if how == "heads" {
		res, err := stream.Prune(ctx, pool, stream.Retention{})
		if err != nil {
			b.Fatal(err)
		}
		return res.Deleted
	}
	var deleted int64
	err := pool.QueryRow(ctx, `
		WITH cut AS (
			DELETE FROM stream_events e USING stream_heads h
			WHERE e.stream_id = h.id AND (e.stream_offset <= h.last_offset - 1000 OR e.ts < now() - interval '24 hours')
			RETURNING e.stream_id, e.stream_offset
		), moved AS (
			UPDATE stream_heads h SET oldest_offset = c.next, due = false
			FROM (SELECT stream_id, max(stream_offset) + 1 AS next FROM cut GROUP BY stream_id) c
			WHERE h.id = c.stream_id
		)
		SELECT count(*) FROM cut`).Scan(&deleted)
	if err != nil {
		b.Fatal(err)
	}
	return deleted
}

// fillIdle writes n streams of 1 000 events each, at their count limit and
// recently pruned (not due), straight in SQL.
func fillIdle(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	payload := strings.ReplaceAll(string(benchPayload), `'`, `''`)
	_, err := pool.Exec(ctx, `
		INSERT INTO stream_heads (stream, last_offset, oldest_offset, oldest_ts, prune_at, due)
		SELECT 'room:idle-' || g, 1000, 1, now(), 1001, false FROM generate_series(1, $1) g`, n)
	if err == nil {
		_, err = pool.Exec(ctx, `
			INSERT INTO stream_events (stream_id, stream_offset, ts, id, sender, event, payload)
			SELECT h.id, o, now(), gen_random_uuid(), gen_random_uuid(), 'dm', convert_to('`+payload+`', 'UTF8')
			FROM stream_heads h, generate_series(1, 1000) o WHERE h.stream LIKE 'room:idle-%'`)
	}
	if err == nil {
		_, err = pool.Exec(ctx, "VACUUM ANALYZE stream_events, stream_heads")
	}
	if err != nil {
		b.Fatal(err)
	}
}
