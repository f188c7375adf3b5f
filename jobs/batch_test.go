package jobs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// TestBatcher: concurrent requests are run in batches of what queued
// while a batch was in flight, at most flushers batches at once, and each
// caller gets its own result.
func TestBatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a lone request runs at once by itself", func(t *testing.T) {
		t.Parallel()
		var sizes []int
		b := &batcher[int, string]{max: 10, flushers: 1, run: func(_ context.Context, in []int) []batchResult[string] {
			sizes = append(sizes, len(in))
			return []batchResult[string]{{out: fmt.Sprint(in[0])}}
		}}
		if out, err := b.do(ctx, 7); out != "7" || err != nil || len(sizes) != 1 || sizes[0] != 1 {
			t.Fatalf("do = %q, %v; batches %v", out, err, sizes)
		}
	})

	t.Run("requests queued behind a batch run together, up to max", func(t *testing.T) {
		t.Parallel()
		const callers, max = 25, 10
		release := make(chan struct{})
		var mu sync.Mutex
		var sizes []int
		var inFlight, most atomic.Int32
		b := &batcher[int, int]{max: max, flushers: 1}
		b.run = func(_ context.Context, in []int) []batchResult[int] {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			if n > most.Load() {
				most.Store(n)
			}
			mu.Lock()
			first := len(sizes) == 0
			sizes = append(sizes, len(in))
			mu.Unlock()
			if first {
				<-release // hold the first batch until every other request queued
			}
			out := make([]batchResult[int], len(in))
			for i, v := range in {
				out[i].out = v * 2
			}
			return out
		}
		var wg sync.WaitGroup
		results := make([]int, callers)
		go func() { results[0], _ = b.do(ctx, 0) }()
		testwait.For(t, 5*time.Second, "the first batch", func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
		for i := 1; i < callers; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); results[i], _ = b.do(ctx, i) }()
		}
		testwait.For(t, 5*time.Second, "every request queued", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == callers-1 })
		close(release)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(sizes) != "[1 10 10 4]" || most.Load() != 1 {
			t.Fatalf("batches %v with up to %d at once, want [1 10 10 4] one at a time", sizes, most.Load())
		}
		for i := 1; i < callers; i++ {
			if results[i] != i*2 {
				t.Fatalf("caller %d got %d", i, results[i])
			}
		}
	})

	t.Run("many callers, two flushers: every caller answered, never more than two batches at once", func(t *testing.T) {
		t.Parallel()
		var inFlight, most, calls atomic.Int32
		b := &batcher[int, int]{max: 8, flushers: 2}
		b.run = func(_ context.Context, in []int) []batchResult[int] {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			calls.Add(1)
			time.Sleep(time.Millisecond) // a statement's round trip
			inFlight.Add(-1)
			out := make([]batchResult[int], len(in))
			for i, v := range in {
				out[i].out = -v
			}
			return out
		}
		var wg sync.WaitGroup
		var wrong atomic.Int32
		for i := range 400 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if v, _ := b.do(ctx, i); v != -i {
					wrong.Add(1)
				}
			}()
		}
		wg.Wait()
		if wrong.Load() != 0 || most.Load() > 2 || calls.Load() >= 400 {
			t.Fatalf("%d wrong answers, %d batches at once, %d batches for 400 requests", wrong.Load(), most.Load(), calls.Load())
		}
		if b.active != 0 || len(b.queue) != 0 {
			t.Fatalf("after the last request: %d leading, %d queued", b.active, len(b.queue))
		}
	})
}
