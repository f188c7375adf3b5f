package main

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// delivery is one webhook call the recorder received.
type delivery struct {
	Path      string
	WebhookID string
	Replica   int // which replica's process made the call; -1 unknown
	Start     time.Time
	End       time.Time // zero while in flight
	Signed    bool
}

// recorder is the local webhook target: it answers 200 (after ?ms= when
// asked, to keep a job running) and records every call with the replica that
// made it.
type recorder struct {
	cl   *cluster
	srv  *http.Server
	base string
	port int

	mu         sync.Mutex
	deliveries []delivery
}

func startRecorder(cl *cluster) (*recorder, error) {
	rec := &recorder{cl: cl}
	var err error
	rec.srv, rec.base, rec.port, err = serveLocal(rec)
	return rec, err
}

// serveLocal serves h on a free loopback port: the server, its base URL
// and its port.
func serveLocal(h http.Handler) (*http.Server, string, int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", 0, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String(), l.Addr().(*net.TCPAddr).Port, nil
}

// url of a recorded path; ms > 0 makes the target answer after that long.
func (rec *recorder) url(path string, ms int) string {
	u := rec.base + path
	if ms > 0 {
		u += "?ms=" + strconv.Itoa(ms)
	}
	return u
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := delivery{
		Path: r.URL.Path, WebhookID: r.Header.Get("webhook-id"), Start: time.Now(),
		Replica: rec.cl.replicaOfPeer(r.RemoteAddr, rec.port),
		Signed:  strings.HasPrefix(r.Header.Get("webhook-signature"), "v1,"),
	}
	rec.mu.Lock()
	rec.deliveries = append(rec.deliveries, d)
	i := len(rec.deliveries) - 1
	rec.mu.Unlock()
	if ms, _ := strconv.Atoi(r.URL.Query().Get("ms")); ms > 0 {
		select {
		case <-r.Context().Done():
			return // the caller died or gave up: stays in flight (no End)
		case <-time.After(time.Duration(ms) * time.Millisecond):
		}
	}
	rec.mu.Lock()
	rec.deliveries[i].End = time.Now()
	rec.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// matching returns the deliveries whose path starts with prefix.
func (rec *recorder) matching(prefix string) []delivery {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []delivery
	for _, d := range rec.deliveries {
		if strings.HasPrefix(d.Path, prefix) {
			out = append(out, d)
		}
	}
	return out
}

// waitFor polls until cond holds on the deliveries under prefix.
func (rec *recorder) waitFor(ctx context.Context, prefix string, d time.Duration, cond func([]delivery) bool) ([]delivery, bool) {
	deadline := time.Now().Add(d)
	for {
		ds := rec.matching(prefix)
		if cond(ds) {
			return ds, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return ds, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (rec *recorder) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = rec.srv.Shutdown(ctx)
	_ = rec.srv.Close()
}
