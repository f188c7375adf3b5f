package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

// BenchmarkBigReads measures what reading big stored events costs a
// replica (the real wiring on :0, in this process): four rooms hold 1 000
// events of 63 KB each (stored straight into the streams); history is 8
// concurrent GET /v1/history?limit=1000 of one room, each read to its end
// (one page); resume is one WebSocket resume naming the four rooms from
// offset 0, read until its resumed frame. Per run it samples the heap
// every 2 ms: heap-peak-MB is the most HeapInuse above the heap before the
// run, alloc-MB the bytes allocated during it, rss-growth-MB the most
// VmRSS above the process's before it (after returning freed memory to
// the OS); min, median and max over the runs are logged, the median
// reported. budget_1MiB is the default read budget (SWITCHBOARD_READ_BYTES);
// unbounded_baseline the same with a budget no read reaches, as reads were
// before they had one.
//
//	go test -run '^$' -bench BigReads -benchtime 5x ./cmd/switchboard/
func BenchmarkBigReads(b *testing.B) {
	dbURL := dbtest.NewDatabaseURL(b)
	rooms := fillRooms(b, dbURL, 4, 1000, 63<<10)
	for _, c := range []struct {
		name   string
		budget int
	}{{"budget_1MiB", 0}, {"unbounded_baseline", 1 << 40}} {
		b.Run("history_8x_limit1000/"+c.name, func(b *testing.B) {
			srv := readServer(b, dbURL, c.budget)
			tok, _ := registerUser(b, srv, "history-"+uuid.NewString()+"@example.com")
			measureReads(b, func() int64 { return readHistoryConcurrently(b, srv, tok, rooms[0], 8) })
		})
		b.Run("resume_4_rooms/"+c.name, func(b *testing.B) {
			srv := readServer(b, dbURL, c.budget)
			tok, _ := registerUser(b, srv, "resume-"+uuid.NewString()+"@example.com")
			measureReads(b, func() int64 { return resumeRooms(b, srv, tok, rooms) })
		})
	}
}

// readServer is a replica with the given read budget (0: the default).
func readServer(b *testing.B, dbURL string, budget int) *testServer {
	cfg := testConfig(b, dbURL)
	cfg.ReadBytes = budget
	return startServer(b, cfg)
}

// fillRooms stores events of size bytes in each of n new rooms.
func fillRooms(b *testing.B, dbURL string, n, events, size int) []string {
	ctx := context.Background()
	pool, err := db.Connect(ctx, dbURL, db.Options{MaxConns: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	payload := []byte(`"` + strings.Repeat("0123456789abcdef", size/16) + `"`)
	rooms := make([]string, n)
	for i := range rooms {
		rooms[i] = "big-" + uuid.NewString()
		batch := make([]stream.Event, 50)
		for j := range batch {
			batch[j] = stream.Event{Stream: stream.RoomStream(rooms[i]), Event: "big", Payload: payload}
		}
		for range events / len(batch) {
			if _, err := stream.Append(ctx, pool, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	return rooms
}

// readHistoryConcurrently reads room's first page n times at once and
// returns the bytes answered.
func readHistoryConcurrently(b *testing.B, srv *testServer, tok, room string, n int) int64 {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
	)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/history?limit=1000&stream=room:"+room, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			defer res.Body.Close()
			got, err := io.Copy(io.Discard, res.Body)
			if err != nil || res.StatusCode != http.StatusOK {
				b.Errorf("history: %d %v", res.StatusCode, err)
			}
			mu.Lock()
			total += got
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

// resumeRooms resumes the rooms from offset 0 on a new socket and returns
// the bytes received until the resumed frame.
func resumeRooms(b *testing.B, srv *testServer, tok string, rooms []string) int64 {
	conn, res, err := websocket.DefaultDialer.Dial(wsURL(srv, issueTicket(b, srv, tok)), nil)
	if err != nil {
		b.Fatalf("dial: %v (%v)", err, res)
	}
	defer conn.Close()
	streams := map[string]any{}
	for _, r := range rooms {
		streams[stream.RoomStream(r)] = map[string]any{"offset": 0, "epoch": ""}
	}
	body, _ := json.Marshal(map[string]any{"event": "resume", "payload": map[string]any{"streams": streams}})
	if err := conn.WriteMessage(websocket.TextMessage, body); err != nil {
		b.Fatal(err)
	}
	var total int64
	for {
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		_, msg, err := conn.ReadMessage()
		if err != nil {
			b.Fatalf("read after %d bytes: %v", total, err)
		}
		total += int64(len(msg))
		if strings.HasPrefix(string(msg[:min(len(msg), 40)]), `{"event":"resumed"`) {
			return total
		}
	}
}

// measureReads runs read b.N times, measuring each run's memory.
func measureReads(b *testing.B, read func() int64) {
	var heap, alloc, rss []float64
	var answered int64
	for range b.N {
		w := watchMemory()
		answered = read()
		h, a, r := w.stop()
		heap, alloc, rss = append(heap, h), append(alloc, a), append(rss, r)
	}
	for _, m := range []struct {
		unit string
		v    []float64
	}{{"heap-peak-MB", heap}, {"alloc-MB", alloc}, {"rss-growth-MB", rss}} {
		slices.Sort(m.v)
		med := m.v[len(m.v)/2]
		b.ReportMetric(med, m.unit)
		b.Logf("%s min %.1f median %.1f max %.1f", m.unit, m.v[0], med, m.v[len(m.v)-1])
	}
	b.ReportMetric(float64(answered)/(1<<20), "answered-MB")
	b.ReportMetric(0, "ns/op")
	b.Logf("load average: %s", loadAverage())
}

// memWatch samples this process's heap and RSS until stopped.
type memWatch struct {
	done                chan struct{}
	wg                  sync.WaitGroup
	baseHeap, baseAlloc uint64
	baseRSS             int64
	peakHeap            uint64
	peakRSS             int64
}

func watchMemory() *memWatch {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w := &memWatch{done: make(chan struct{}), baseHeap: ms.HeapInuse, baseAlloc: ms.TotalAlloc, baseRSS: vmRSS()}
	w.peakHeap, w.peakRSS = w.baseHeap, w.baseRSS
	w.wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				w.peakHeap, w.peakRSS = max(w.peakHeap, ms.HeapInuse), max(w.peakRSS, vmRSS())
			}
		}
	})
	return w
}

// stop ends the sampling and returns the heap peak, the bytes allocated
// and the RSS peak, in MB above where they were at the start.
func (w *memWatch) stop() (heapMB, allocMB, rssMB float64) {
	close(w.done)
	w.wg.Wait()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	const mb = 1 << 20
	return float64(w.peakHeap-w.baseHeap) / mb, float64(ms.TotalAlloc-w.baseAlloc) / mb, float64(w.peakRSS-w.baseRSS) / mb
}

// vmRSS is this process's resident set in bytes (0 where /proc has none).
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// loadAverage is the machine's 1, 5 and 15 minute load.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
