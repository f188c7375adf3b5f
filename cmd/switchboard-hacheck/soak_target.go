package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// call is one webhook call the soak's target answered, identified by the
// run and attempt the caller named (X-Switchboard-Run-Id, -Attempt).
type call struct {
	Seq     int64 // the call's number, also its answer's body: {"call":Seq}
	Path    string
	RunID   string
	Attempt int
	Status  int // what the target answered
	Replica int // which replica's process called; -1 unknown
	At      time.Time
	// Answered is when the answer was written; zero when the caller went
	// away first.
	Answered time.Time
}

// answer is how the target answers one call.
type answer struct {
	status int
	delay  time.Duration
}

// answerFor decides the answer from the path, run and attempt alone, so a
// second call of the same attempt (a late worker) gets the same answer.
// Cron runs (/cron/…) answer 200 within 0.8 s. On-demand runs (/od/…) take
// 0.3–3 s, so a replica stopped or killed mid-soak is usually holding some;
// a quarter of them answer 503 to attempt 1 and a tenth of those to attempt
// 2 too (retried after River's backoff: 1 s, then 16 s). Later attempts
// succeed, so every run can end succeeded within the drain.
func answerFor(path, runID string, attempt int) answer {
	h := fnv.New64a()
	_, _ = h.Write([]byte(runID))
	v := h.Sum64()
	if strings.HasPrefix(path, "/cron/") {
		return answer{status: http.StatusOK, delay: time.Duration(v%800) * time.Millisecond}
	}
	a := answer{status: http.StatusOK, delay: 300*time.Millisecond + time.Duration(v%2700)*time.Millisecond}
	retried := v%4 == 0
	switch {
	case attempt == 1 && retried:
		a.status = http.StatusServiceUnavailable
	case attempt == 2 && retried && (v/4)%10 == 0:
		a.status = http.StatusServiceUnavailable
	}
	return a
}

// soakTarget is the webhook target of the soak: it answers per answerFor
// with a body naming the call ({"call":N}, which the run's and attempt's
// response_excerpt keep) and logs every call.
type soakTarget struct {
	cl   *cluster
	srv  *http.Server
	base string
	port int

	mu    sync.Mutex
	calls []call
}

func startSoakTarget(cl *cluster) (*soakTarget, error) {
	t := &soakTarget{cl: cl}
	var err error
	t.srv, t.base, t.port, err = serveLocal(t)
	return t, err
}

func (t *soakTarget) url(path string) string { return t.base + path }

func (t *soakTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	attempt, _ := strconv.Atoi(r.Header.Get("X-Switchboard-Attempt"))
	c := call{
		Path: r.URL.Path, RunID: r.Header.Get("X-Switchboard-Run-Id"), Attempt: attempt, At: time.Now(),
		Replica: t.cl.replicaOfPeer(r.RemoteAddr, t.port),
	}
	a := answerFor(c.Path, c.RunID, c.Attempt)
	c.Status = a.status
	i := t.record(c)
	select {
	case <-r.Context().Done():
		return // the caller went away: no answer
	case <-time.After(a.delay):
	}
	body, _ := json.Marshal(map[string]int64{"call": int64(i)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = w.Write(body)
	t.mu.Lock()
	t.calls[i].Answered = time.Now()
	t.mu.Unlock()
}

// record appends c and returns its index, which is its Seq.
func (t *soakTarget) record(c call) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.Seq = int64(len(t.calls))
	t.calls = append(t.calls, c)
	return int(c.Seq)
}

// snapshot copies the call log.
func (t *soakTarget) snapshot() []call {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]call(nil), t.calls...)
}

func (t *soakTarget) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = t.srv.Shutdown(ctx)
	_ = t.srv.Close()
}

// callOfExcerpt reads the call number out of a response excerpt the target
// wrote; ok is false for anything else.
func callOfExcerpt(excerpt string) (int64, bool) {
	var v struct {
		Call *int64 `json:"call"`
	}
	if json.Unmarshal([]byte(excerpt), &v) != nil || v.Call == nil {
		return 0, false
	}
	return *v.Call, true
}

// runAttempt names one attempt of one run.
type runAttempt struct {
	run     string
	attempt int
}

func (k runAttempt) String() string { return fmt.Sprintf("run %s attempt %d", k.run, k.attempt) }
