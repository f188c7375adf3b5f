package realtime

// Benchmarks of durable streams, each beside the NOTIFY-only path
// measured in the same run (run without -race):
//
//	go test -run '^$' -bench 'Stored|Resume' -benchtime 1x ./realtime/
//
// Two replicas (a hub and a bus each, their own pools, one database): A
// publishes, a socket on B receives. Stored events are `bench` events to a
// user (appended to user:<id>, then rung); the baseline is `typing` frames
// to the same user, which are not stored and travel in the NOTIFY itself.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime/stream"
)

const (
	benchStored    = "bench"     // stored: appended to the user's stream
	benchEphemeral = eventTyping // NOTIFY only: not stored
)

// streamRecv reads one socket and records, for frames of one event name,
// each one's latency, its seq and (for stored frames) its offset in
// arrival order.
type streamRecv struct {
	conn    *websocket.Conn
	event   string
	mu      sync.Mutex
	lat     []time.Duration
	seen    map[int]bool
	offsets []int64
	dups    int
	got     atomic.Int64
}

// newStreamRecv dials node n as user and waits until the socket follows
// its stream (an empty resume releases the hold a new socket's user stream
// waits under for its first frame).
func newStreamRecv(b *testing.B, n *node, user, event string) *streamRecv {
	b.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	r := &streamRecv{conn: conn, event: event, seen: map[int]bool{}}
	testwait.For(b, 10*time.Second, "receiver registered", func() bool { return n.hub.hasUser(user) })
	resumed := make(chan struct{})
	go r.read(resumed)
	if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"event":"resume","payload":{"streams":{}}}`)); err != nil {
		b.Fatal(err)
	}
	select {
	case <-resumed:
	case <-time.After(10 * time.Second):
		b.Fatal("no resumed frame within 10 s")
	}
	return r
}

func (r *streamRecv) read(resumed chan struct{}) {
	for {
		_, msg, err := r.conn.ReadMessage()
		if err != nil {
			return
		}
		now := time.Now()
		var f struct {
			Event   string `json:"event"`
			Offset  int64  `json:"offset"`
			Payload stamp  `json:"payload"`
		}
		if json.Unmarshal(msg, &f) != nil {
			continue
		}
		if f.Event == EventResumed && resumed != nil {
			close(resumed)
			resumed = nil
		}
		if f.Event != r.event {
			continue
		}
		r.mu.Lock()
		if r.seen[f.Payload.Seq] {
			r.dups++
		} else {
			r.seen[f.Payload.Seq] = true
			r.lat = append(r.lat, now.Sub(time.Unix(0, f.Payload.Sent)))
		}
		if f.Offset != 0 {
			r.offsets = append(r.offsets, f.Offset)
		}
		r.mu.Unlock()
		r.got.Add(1)
	}
}

// verdict says whether exactly seqs 0..count-1 arrived, once each, and (for
// stored frames) with offsets first, first+1, … in arrival order.
func (r *streamRecv) verdict(count int, stored bool) (ok bool, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) != count || r.dups > 0 {
		return false, fmt.Sprintf("%d of %d distinct, %d duplicates", len(r.seen), count, r.dups)
	}
	if !stored {
		return true, ""
	}
	if len(r.offsets) != count {
		return false, fmt.Sprintf("%d offsets for %d events", len(r.offsets), count)
	}
	for i := 1; i < len(r.offsets); i++ {
		if r.offsets[i] != r.offsets[i-1]+1 {
			return false, fmt.Sprintf("offset %d after %d", r.offsets[i], r.offsets[i-1])
		}
	}
	return true, ""
}

func (r *streamRecv) reset() {
	r.mu.Lock()
	r.lat, r.seen, r.offsets, r.dups = nil, map[int]bool{}, nil, 0
	r.mu.Unlock()
	r.got.Store(0)
}

func (r *streamRecv) percentiles() (p50, p99, max time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return percentiles(r.lat)
}

func percentiles(ds []time.Duration) (p50, p99, max time.Duration) {
	l := slices.Clone(ds)
	slices.Sort(l)
	if len(l) == 0 {
		return 0, 0, 0
	}
	return l[len(l)/2], l[len(l)*99/100], l[len(l)-1]
}

// paceConcurrent publishes count events to user at rate per second:
// a pacer hands out stamped sequence numbers on schedule and 256 publishers
// send them, because a stored publish returns only after its append
// committed (one publisher would be bound by the commit's latency; the
// bus batches what many publish at once). The stamp is taken when the
// pacer hands the event out, so time spent waiting for a free publisher
// counts in the latency. It returns the rate achieved: count over the time
// from the first hand-out until the last publish returned.
func paceConcurrent(b *testing.B, bus *Bus, user, event string, rate, count int) float64 {
	b.Helper()
	const publishers = 256
	ctx := context.Background()
	jobs := make(chan stamp, 4096)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() {
			for s := range jobs {
				payload, _ := json.Marshal(s)
				if err := bus.Publish(ctx, Event{Event: event, To: user, Payload: payload}); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range count {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		jobs <- stamp{Seq: i, Sent: time.Now().UnixNano()}
	}
	close(jobs)
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return float64(count) / time.Since(start).Seconds()
}

// BenchmarkStoredLatency: cross-replica latency of stored events at a paced
// 1 000 msg/s for 3 s (publish → append committed → doorbell NOTIFY → B's
// LISTEN → B's socket), beside the NOTIFY-only baseline (typing frames, not
// stored) to the same socket in the same run. p50, p99 and max in µs; every
// event must arrive once, stored ones in offset order.
func BenchmarkStoredLatency(b *testing.B) {
	dbURL := dbtest.NewDatabaseURL(b)
	a, bn := startNode(b, dbURL, HubOptions{}), startNode(b, dbURL, HubOptions{})
	const rate, seconds = 1000, 3
	measure := func(event string) (p50, p99, max time.Duration) {
		user := uuid.NewString()
		r := newStreamRecv(b, bn, user, event)
		paceConcurrent(b, a.bus, user, event, rate, rate/5) // warm up
		testwait.For(b, 10*time.Second, "warm-up delivered", func() bool { return r.got.Load() == rate/5 })
		r.reset()
		achieved := paceConcurrent(b, a.bus, user, event, rate, rate*seconds)
		testwait.For(b, 10*time.Second, "all delivered", func() bool { return r.got.Load() >= rate*seconds })
		if ok, why := r.verdict(rate*seconds, event == benchStored); !ok {
			b.Fatalf("%s: %s", event, why)
		}
		p50, p99, max = r.percentiles()
		b.Logf("%-6s at %.0f msg/s for %d s, cross-replica: p50 %s p99 %s max %s", event, achieved, seconds, p50, p99, max)
		return p50, p99, max
	}
	for range b.N {
		e50, e99, emax := measure(benchEphemeral)
		s50, s99, smax := measure(benchStored)
		b.ReportMetric(us(s50), "stored-p50-µs")
		b.ReportMetric(us(s99), "stored-p99-µs")
		b.ReportMetric(us(smax), "stored-max-µs")
		b.ReportMetric(us(e50), "baseline-p50-µs")
		b.ReportMetric(us(e99), "baseline-p99-µs")
		b.ReportMetric(us(emax), "baseline-max-µs")
	}
}

func us(d time.Duration) float64 { return float64(d.Microseconds()) }

// BenchmarkStoredRate: the highest sustained cross-replica rate with
// nothing lost. A publishes to one user at 5 000, 10 000, 15 000, 20 000,
// 30 000 and 40 000 msg/s, 3 s per step, up to the first that fails; a
// step passes when the publishers kept 95 % of the pace and B's socket got
// every event once, stored ones in offset order, within 2 s of the last
// publish. Stored events beside the NOTIFY-only baseline (typing frames)
// in the same run.
func BenchmarkStoredRate(b *testing.B) {
	dbURL := dbtest.NewDatabaseURL(b)
	a, bn := startNode(b, dbURL, HubOptions{}), startNode(b, dbURL, HubOptions{})
	const seconds = 3
	ramp := func(event string) int {
		best := 0
		for _, rate := range []int{5000, 10000, 15000, 20000, 30000, 40000} {
			user := uuid.NewString()
			r := newStreamRecv(b, bn, user, event)
			count := rate * seconds
			achieved := paceConcurrent(b, a.bus, user, event, rate, count)
			deadline := time.Now().Add(2 * time.Second)
			for r.got.Load() < int64(count) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			ok, why := r.verdict(count, event == benchStored)
			_, p99, max := r.percentiles()
			b.Logf("%-6s target %5d msg/s: sent at %6.0f msg/s, delivered %d/%d, p99 %s max %s %s",
				event, rate, achieved, r.got.Load(), count, p99, max, why)
			_ = r.conn.Close()
			if !ok || achieved < 0.95*float64(rate) {
				break
			}
			best = rate
		}
		return best
	}
	for range b.N {
		e := ramp(benchEphemeral)
		s := ramp(benchStored)
		b.Logf("highest sustained cross-replica rate with nothing lost: stored %d msg/s, NOTIFY-only %d msg/s", s, e)
		b.ReportMetric(float64(s), "stored-max-msg/s")
		b.ReportMetric(float64(e), "baseline-max-msg/s")
	}
}

// BenchmarkResume: a client that last saw offset 1 of its user stream
// reconnects to replica B over a real WebSocket and sends resume while
// 1 000 events it missed are stored; the time from sending resume until
// its resumed frame arrived, after all 1 000 in order, p50/p99/max over 30
// resumes (a new user each).
func BenchmarkResume(b *testing.B) {
	dbURL := dbtest.NewDatabaseURL(b)
	a, bn := startNode(b, dbURL, HubOptions{}), startNode(b, dbURL, HubOptions{})
	const missed, rounds = 1000, 30
	store := Streams{DB: a.pool}
	for range b.N {
		var ds []time.Duration
		for range rounds {
			ds = append(ds, resumeOnce(b, store, bn, missed))
		}
		p50, p99, max := percentiles(ds)
		b.Logf("resume of %d missed events, %d resumes: p50 %s p99 %s max %s", missed, rounds, p50, p99, max)
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(max.Microseconds())/1000, "max-ms")
	}
}

// resumeOnce stores 1 + missed events for a new user (in batches of 500,
// as the bus appends), resumes from offset 1 on n and returns how long the
// resume took.
func resumeOnce(b *testing.B, store Streams, n *node, missed int) time.Duration {
	b.Helper()
	ctx := context.Background()
	user := uuid.NewString()
	name := stream.UserStream(user)
	var epoch string
	for done := 0; done < 1+missed; done += 500 {
		evs := make([]stream.Event, min(500, 1+missed-done))
		for i := range evs {
			evs[i] = stream.Event{Stream: name, Event: benchStored, ID: uuid.NewString(),
				Payload: []byte(fmt.Sprintf(`{"seq":%d,"sent":0}`, done+i))}
		}
		ps, err := store.Append(ctx, evs)
		if err != nil {
			b.Fatal(err)
		}
		epoch = ps[0].Epoch
	}
	conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	frame := fmt.Sprintf(`{"event":"resume","payload":{"streams":{%q:{"offset":1,"epoch":%q}}}}`, name, epoch)
	start := time.Now()
	if err := conn.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		b.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	next := int64(2)
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			b.Fatalf("resume: %v after offset %d", err, next-1)
		}
		var f struct {
			Event   string `json:"event"`
			Offset  int64  `json:"offset"`
			Payload struct {
				Streams map[string]struct {
					Recovered bool `json:"recovered"`
				} `json:"streams"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(msg, &f); err != nil {
			b.Fatal(err)
		}
		switch f.Event {
		case benchStored:
			if f.Offset != next {
				b.Fatalf("offset %d, want %d", f.Offset, next)
			}
			next++
		case EventResumed:
			took := time.Since(start)
			if next != int64(missed)+2 || !f.Payload.Streams[name].Recovered {
				b.Fatalf("resumed after %d of %d events, recovered %v", next-2, missed, f.Payload.Streams[name].Recovered)
			}
			return took
		}
	}
}
