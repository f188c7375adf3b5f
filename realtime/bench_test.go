package realtime

// Benchmarks that print figures (run without -race):
//
//	go test -run '^$' -bench . -benchtime 1x ./realtime/
//
// Each runs its experiment once per invocation and reports with
// b.ReportMetric; the logs carry the detail.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// stamp is the payload of a benchmark message.
type stamp struct {
	Seq  int   `json:"seq"`
	Sent int64 `json:"sent"` // UnixNano
}

// receiver reads frames of one socket and records each one's latency.
type receiver struct {
	conn *websocket.Conn
	mu   sync.Mutex
	lat  []time.Duration
	seen map[int]bool
	got  atomic.Int64
}

func newReceiver(b *testing.B, n *node, user string) *receiver {
	b.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(n.url+"?user="+user, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	r := &receiver{conn: conn, seen: map[int]bool{}}
	testwait.For(b, 10*time.Second, "receiver registered", func() bool { return n.hub.hasUser(user) })
	go r.read()
	return r
}

func (r *receiver) read() {
	for {
		_, msg, err := r.conn.ReadMessage()
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		var f struct {
			Payload stamp `json:"payload"`
		}
		if json.Unmarshal(msg, &f) != nil {
			continue
		}
		r.mu.Lock()
		if !r.seen[f.Payload.Seq] {
			r.seen[f.Payload.Seq] = true
			r.lat = append(r.lat, time.Duration(now-f.Payload.Sent))
		}
		r.mu.Unlock()
		r.got.Add(1)
	}
}

func (r *receiver) reset() {
	r.mu.Lock()
	r.lat, r.seen = nil, map[int]bool{}
	r.mu.Unlock()
	r.got.Store(0)
}

func (r *receiver) percentiles() (p50, p99, max time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := slices.Clone(r.lat)
	slices.Sort(l)
	if len(l) == 0 {
		return 0, 0, 0
	}
	return l[len(l)/2], l[len(l)*99/100], l[len(l)-1]
}

// BenchmarkDeliveryLatency: one user with a socket on node A and one on
// node B; A publishes stored events at 1000 msg/s for 3 s (paceConcurrent).
// A's socket measures same-replica latency (append committed → local hub),
// B's cross-replica (append → doorbell pg_notify → LISTEN → hub). The
// cross-replica rate is BenchmarkStoredRate's.
func BenchmarkDeliveryLatency(b *testing.B) {
	dbURL := dbtest.NewDatabaseURL(b)
	a, bn := startNode(b, dbURL, HubOptions{}), startNode(b, dbURL, HubOptions{})
	user := uuid.NewString()
	same, cross := newReceiver(b, a, user), newReceiver(b, bn, user)
	const rate, seconds = 1000, 3
	paceConcurrent(b, a.bus, user, benchStored, rate, rate/10) // warm up
	testwait.For(b, 10*time.Second, "warm-up delivered", func() bool { return cross.got.Load() == rate/10 && same.got.Load() == rate/10 })
	same.reset()
	cross.reset()
	for range b.N {
		achieved := paceConcurrent(b, a.bus, user, benchStored, rate, rate*seconds)
		testwait.For(b, 10*time.Second, "all delivered", func() bool { return cross.got.Load() == rate*seconds && same.got.Load() == rate*seconds })
		s50, s99, smax := same.percentiles()
		c50, c99, cmax := cross.percentiles()
		b.Logf("at %.0f msg/s for %d s: same-replica p50 %s p99 %s max %s; cross-replica p50 %s p99 %s max %s",
			achieved, seconds, s50, s99, smax, c50, c99, cmax)
		b.ReportMetric(float64(s50.Microseconds()), "same-p50-µs")
		b.ReportMetric(float64(s99.Microseconds()), "same-p99-µs")
		b.ReportMetric(float64(c50.Microseconds()), "cross-p50-µs")
		b.ReportMetric(float64(c99.Microseconds()), "cross-p99-µs")
	}
}

// BenchmarkIdleConnectionMemory holds 10 000 idle sockets on one hub and
// reports the server side's memory per connection. The clients live in a
// child process so their memory is not counted.
func BenchmarkIdleConnectionMemory(b *testing.B) {
	const conns = 10000
	raiseFileLimit(b)
	n := startNode(b, dbtest.NewDatabaseURL(b), HubOptions{})
	for range b.N {
		heap0, stack0, rss0, g0 := memNow()
		child := exec.Command(os.Args[0], "-test.run=^TestHelperIdleClients$")
		child.Env = append(os.Environ(), "SWITCHBOARD_BENCH_WS_URL="+n.url, "SWITCHBOARD_BENCH_CONNS="+strconv.Itoa(conns))
		stdout, _ := child.StdoutPipe()
		stdin, _ := child.StdinPipe()
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			b.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if !strings.HasPrefix(line, "ready") {
			b.Fatalf("client process: %q", line)
		}
		testwait.For(b, 10*time.Second, "sockets registered", func() bool { return n.hub.LocalConnections() == conns })
		heap1, stack1, rss1, g1 := memNow()
		if f := os.Getenv("HEAPPROF"); f != "" { // a heap profile with every socket open
			w, _ := os.Create(f)
			_ = pprof.Lookup("heap").WriteTo(w, 0)
			w.Close()
		}
		perConn := float64(heap1-heap0+stack1-stack0) / conns
		b.Logf("%d idle sockets: heap +%.1f MiB, stacks +%.1f MiB, RSS +%.1f MiB, goroutines +%d; %.1f KiB per connection (heap+stack), %.1f KiB RSS",
			conns, mib(heap1-heap0), mib(stack1-stack0), mib(rss1-rss0), g1-g0, perConn/1024, float64(rss1-rss0)/conns/1024)
		b.ReportMetric(perConn/1024, "KiB/conn")
		b.ReportMetric(float64(g1-g0)/conns, "goroutines/conn")
		stdin.Close()
		_ = child.Wait()
		testwait.For(b, 10*time.Second, "sockets closed", func() bool { return n.hub.LocalConnections() == 0 })
	}
}

// TestHelperIdleClients is the client process of the memory benchmark.
func TestHelperIdleClients(t *testing.T) {
	url := os.Getenv("SWITCHBOARD_BENCH_WS_URL")
	if url == "" {
		t.Skip("the client side of BenchmarkIdleConnectionMemory")
	}
	raiseFileLimit(t)
	n, _ := strconv.Atoi(os.Getenv("SWITCHBOARD_BENCH_CONNS"))
	conns := make([]*websocket.Conn, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, _, err := websocket.DefaultDialer.Dial(url+"?user="+uuid.NewString(), nil)
			if err != nil {
				t.Errorf("dial %d: %v", i, err)
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

func raiseFileLimit(t testing.TB) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 10500 {
		t.Skipf("open file limit %d is too low for 10 000 sockets", lim.Cur)
	}
}

func memNow() (heap, stack, rss uint64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			rss = pages * uint64(os.Getpagesize())
		}
	}
	return m.HeapInuse, m.StackInuse, rss, runtime.NumGoroutine()
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
