package main

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// readyEvery is how often the soak asks every replica whether it is ready.
const readyEvery = 500 * time.Millisecond

// readiness watches every replica's /healthz/ready through the soak and
// records the spans in which none was ready: every replica down, stopped,
// or unable to reach PostgreSQL. The design lets ticks wait then (a tick
// claimed past the catch-up limit is folded), whatever the cause: a
// PostgreSQL restart, or a machine so short of CPU that PostgreSQL does not
// answer in time.
type readiness struct {
	h  *harness
	hc *http.Client

	mu    sync.Mutex
	spans []window
	since time.Time // when the current span began; zero while one is ready
}

func newReadiness(h *harness) *readiness {
	return &readiness{h: h, hc: &http.Client{Timeout: time.Second}}
}

// run asks until stop is closed, then closes a span still open.
func (w *readiness) run(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(readyEvery)
	defer t.Stop()
	for {
		w.note(w.anyReady(ctx), time.Now())
		select {
		case <-ctx.Done():
		case <-stop:
		case <-t.C:
			continue
		}
		w.note(true, time.Now())
		return
	}
}

// anyReady asks every replica at once; true as soon as one answers 200.
func (w *readiness) anyReady(ctx context.Context) bool {
	ready := make(chan bool, len(w.h.cl.replicas))
	for _, r := range w.h.cl.replicas {
		go func() {
			resp, err := send(ctx, w.hc, http.MethodGet, r.URL("/healthz/ready"), "", nil)
			ready <- err == nil && resp.Status == http.StatusOK
		}()
	}
	for range w.h.cl.replicas {
		if <-ready {
			return true
		}
	}
	return false
}

// note records what one round found at t.
func (w *readiness) note(anyReady bool, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !anyReady && w.since.IsZero():
		w.since = t
	case anyReady && !w.since.IsZero():
		w.spans = append(w.spans, window{from: w.since, to: t})
		w.since = time.Time{}
	}
}

// unready returns the spans in which no replica was ready.
func (w *readiness) unready() []window {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]window(nil), w.spans...)
}

// noneReady are the spans of ws, each widened by a tick and the polling
// interval on either side (a claim in flight when it began; the span's
// edges are known to a round).
func noneReady(ws []window) []window {
	out := make([]window, len(ws))
	for i, s := range ws {
		out[i] = window{from: s.from.Add(-tickPeriod - readyEvery), to: s.to.Add(tickPeriod)}
	}
	return out
}

// spanTotal is the summed length of ws.
func spanTotal(ws []window) time.Duration {
	var d time.Duration
	for _, s := range ws {
		d += s.to.Sub(s.from)
	}
	return d
}
