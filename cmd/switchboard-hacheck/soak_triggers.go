package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// triggerEvery is how often the soak triggers an on-demand run with a new
// idempotency key.
const triggerEvery = 500 * time.Millisecond

// triggerRetryFor bounds how long one request of a key is retried.
const triggerRetryFor = 90 * time.Second

// maxSending bounds the sends in flight: past it, a tick starts no new key
// (a client that waits for its answers, rather than piling up retries on a
// cluster that is recovering).
const maxSending = 32

// keyedTrigger is one idempotency key and what the API answered for it.
type keyedTrigger struct {
	key   string
	task  string
	sends int // requests sent with it at once, to different replicas
	// runs are the run ids of the acknowledged answers (one per send).
	runs []string
	// failures are the sends that gave up, and why.
	failures []string
}

// triggers sends on-demand triggers with idempotency keys: every
// triggerEvery a new key for one of the tasks, a quarter of them sent
// twice at once to two different replicas, half of them also with the same
// Idempotency-Key header. Each send retries on another replica after a
// connection error, a 5xx, a 429 or a 409 (the header's request in flight),
// with backoff, until it is acknowledged (202, or 200 for the key's first
// run).
type triggers struct {
	h     *harness
	owner *user
	tasks []string
	rng   *rand.Rand
	tag   string

	mu       sync.Mutex
	keys     []*keyedTrigger
	sending  int // sends in flight
	deferred int // ticks that started no key, maxSending being in flight
	wg       sync.WaitGroup
}

// run sends until stop is closed, then waits for the sends in flight.
func (t *triggers) run(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(triggerEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
		case <-stop:
		case <-tick.C:
			t.start(ctx, n)
			continue
		}
		break
	}
	t.wg.Wait()
}

// start sends key n once or twice (to different replicas, at once).
func (t *triggers) start(ctx context.Context, n int) {
	kt := &keyedTrigger{key: fmt.Sprintf("soak-%s-%05d", t.tag, n), task: t.tasks[n%len(t.tasks)], sends: 1}
	if t.rng.IntN(4) == 0 {
		kt.sends = 2
	}
	header := t.rng.IntN(2) == 0
	first := t.rng.IntN(replicaCount)
	replicas := []int{first, (first + 1 + t.rng.IntN(replicaCount-1)) % replicaCount}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sending+kt.sends > maxSending {
		t.deferred++
		return
	}
	t.keys = append(t.keys, kt)
	t.sending += kt.sends
	for i := range kt.sends {
		t.wg.Go(func() {
			t.send(ctx, kt, replicas[i], header)
			t.mu.Lock()
			t.sending--
			t.mu.Unlock()
		})
	}
}

// send posts the trigger until it is acknowledged, starting at replica r.
func (t *triggers) send(ctx context.Context, kt *keyedTrigger, r int, header bool) {
	body := map[string]any{"idempotency_key": kt.key, "payload": map[string]string{"key": kt.key}}
	path := "/v1/tasks/" + kt.task + "/runs"
	deadline := time.Now().Add(triggerRetryFor)
	var tries answers
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		rr := (r + i) % replicaCount
		status, runID, err := t.post(ctx, rr, path, kt.key, header, body)
		tries.add(rr, status, err)
		switch {
		case err == nil && (status == http.StatusAccepted || status == http.StatusOK):
			t.record(kt, runID, "")
			return
		case err == nil && status != http.StatusConflict && status != http.StatusTooManyRequests && status < 500:
			t.record(kt, "", fmt.Sprintf("r%d answered %d (header %v; %s)", rr+1, status, header, tries))
			return
		}
		wait := backoff(i, 200*time.Millisecond, 5*time.Second)
		if status == http.StatusTooManyRequests || status == http.StatusConflict {
			wait = max(wait, time.Second) // as Retry-After says
		}
		sleepCtx(ctx, wait)
	}
	t.record(kt, "", fmt.Sprintf("gave up after %s (header %v; %s)", triggerRetryFor, header, tries))
}

// answers tallies what the tries of one request got, for a report.
type answers struct {
	n      map[string]int
	order  []string
	last   string
	lastAt time.Time
}

func (a *answers) add(r, status int, err error) {
	k := fmt.Sprint(status)
	if err != nil {
		k = "error"
		a.last = fmt.Sprintf("r%d: %v", r+1, err)
	} else {
		a.last = fmt.Sprintf("r%d answered %d", r+1, status)
	}
	if a.n == nil {
		a.n = map[string]int{}
	}
	if a.n[k] == 0 {
		a.order = append(a.order, k)
	}
	a.n[k]++
	a.lastAt = time.Now()
}

// String is "12 tries: 409×9 error×3; last at 15:04:05.000: r2 answered 409".
func (a answers) String() string {
	var parts []string
	total := 0
	for _, k := range a.order {
		parts = append(parts, fmt.Sprintf("%s×%d", k, a.n[k]))
		total += a.n[k]
	}
	return fmt.Sprintf("%d tries: %s; last at %s: %s", total, strings.Join(parts, " "), clock(a.lastAt), a.last)
}

// post sends one trigger request (5 s at most: a stopped replica does not
// answer) and returns the status and the run id it names.
func (t *triggers) post(ctx context.Context, r int, path, key string, header bool, body any) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, _ := json.Marshal(body)
	headers := map[string]string{"Authorization": "Bearer " + t.owner.Token, "Content-Type": "application/json"}
	if header {
		headers["Idempotency-Key"] = key
	}
	resp, err := sendRaw(ctx, defaultClient, http.MethodPost, t.h.cl.replicas[r].URL(path), headers, b)
	if err != nil {
		return 0, "", err
	}
	var rn run
	if resp.Status == http.StatusAccepted || resp.Status == http.StatusOK {
		if err := resp.decode(&rn); err != nil || rn.ID == "" {
			return 0, "", fmt.Errorf("answer %d without a run: %v", resp.Status, err)
		}
	}
	return resp.Status, rn.ID, nil
}

func (t *triggers) record(kt *keyedTrigger, runID, failure string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if runID != "" {
		kt.runs = append(kt.runs, runID)
	}
	if failure != "" {
		kt.failures = append(kt.failures, failure)
	}
}

// deferredTicks counts the ticks that started no key.
func (t *triggers) deferredTicks() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deferred
}

// snapshot copies every key's record.
func (t *triggers) snapshot() []keyedTrigger {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]keyedTrigger, len(t.keys))
	for i, kt := range t.keys {
		out[i] = *kt
		out[i].runs = append([]string(nil), kt.runs...)
		out[i].failures = append([]string(nil), kt.failures...)
	}
	return out
}
