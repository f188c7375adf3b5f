package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// checkSigterm: SIGTERM one replica while four users load the API through a
// retrying client (connection errors and 503 go to the next replica). Zero
// requests may fail, the replica must exit 0 after finishing its jobs, and
// every run the API accepted must succeed.
func (h *harness) checkSigterm(ctx context.Context) (figures, error) {
	var f figures
	var errs []error
	victim := 2
	vr := h.cl.replicas[victim]
	f.add("victim", vr.Name())

	l, err := h.newLoad(ctx)
	if err != nil {
		errs = append(errs, err) // the load runs without manual runs
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	done := l.run(loadCtx)
	sleepCtx(ctx, h.opts.profile.load/2)

	// Slow runs so a job is likely running on the victim when it is told to stop.
	kim := h.users["kim"]
	slow, err := h.slowRuns(ctx, kim, "/slow/term-", 3, 1500)
	if err != nil {
		errs = append(errs, err)
	}
	h.rec.waitFor(ctx, "/slow/term-", 5*time.Second, func(ds []delivery) bool { return len(ds) >= len(slow) })

	exitedAt, termErrs := h.terminate(ctx, &f, victim)
	errs = append(errs, termErrs...)
	sleepCtx(ctx, h.opts.profile.load/2)
	stopLoad()
	<-done

	f.add("requests", l.ok.Load()+l.failed.Load())
	f.add("retried", l.retried.Load())
	f.add("failed", l.failed.Load())
	if n := l.failed.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d API requests failed through the retrying client, first: %v", n, l.firstErr()))
	}
	if err := h.jobsFinishedBefore(&f, "/slow/term-", victim, exitedAt); err != nil {
		errs = append(errs, err)
	}

	if err := vr.Start(); err != nil {
		return f, errors.Join(append(errs, err)...)
	}
	if err := vr.WaitReady(ctx, 60*time.Second); err != nil {
		errs = append(errs, err)
	}
	ids := l.runIDs()
	for _, id := range slow {
		ids[id] = kim
	}
	errs = append(errs, h.checkNoLostRuns(ctx, &f, ids)...)
	return f, errors.Join(errs...)
}

// terminate sends SIGTERM to replica r with a socket connected to it and its
// readiness watched: it must exit 0, tell the socket server.draining, and
// (figure only) fail readiness first.
func (h *harness) terminate(ctx context.Context, f *figures, r int) (time.Time, []error) {
	var errs []error
	vr := h.cl.replicas[r]
	sock, err := h.openSocket(ctx, h.users["alice"], r, r)
	if err != nil {
		errs = append(errs, err)
	} else {
		defer sock.close()
	}
	watch := watchReadiness(ctx, h, r)
	took, code, err := vr.Terminate(40 * time.Second)
	exitedAt := time.Now()
	f.add("exit", code)
	f.add("shutdown", took)
	f.add("ready_503_first", watch())
	if err != nil {
		errs = append(errs, err)
	} else if code != 0 {
		errs = append(errs, fmt.Errorf("%s exited %d after SIGTERM, want 0", vr.Name(), code))
	}
	if sock != nil {
		told := sock.count(func(fr frame) bool { return fr.Event == "server.draining" }) > 0
		f.add("socket_told_draining", told)
		if !told {
			errs = append(errs, fmt.Errorf("the socket on %s got no server.draining before the exit (got %s)", vr.Name(), sock.summary()))
		}
	}
	return exitedAt, errs
}

// jobsFinishedBefore: every call under prefix made by replica r ended before
// it exited (a graceful stop finishes its running jobs).
func (h *harness) jobsFinishedBefore(f *figures, prefix string, r int, exitedAt time.Time) error {
	onVictim, finished := 0, 0
	for _, d := range h.rec.matching(prefix) {
		if d.Replica == r {
			onVictim++
			if !d.End.IsZero() && !d.End.After(exitedAt) {
				finished++
			}
		}
	}
	f.add("jobs_on_victim", onVictim)
	f.add("finished_before_exit", finished)
	if finished < onVictim {
		return fmt.Errorf("%s exited with %d of its %d running jobs unfinished", h.cl.replicas[r].Name(), onVictim-finished, onVictim)
	}
	return nil
}

// checkNoLostRuns: every accepted run ends succeeded.
func (h *harness) checkNoLostRuns(ctx context.Context, f *figures, ids map[string]*user) []error {
	byUser := map[*user][]string{}
	for id, u := range ids {
		byUser[u] = append(byUser[u], id)
	}
	var errs []error
	succeeded, lost := 0, 0
	for u, list := range byUser {
		runs, err := h.waitTerminal(ctx, u, list, 30*time.Second)
		if err != nil {
			errs = append(errs, err)
		}
		for _, id := range list {
			if rn := runs[id]; rn != nil && rn.Status == "succeeded" {
				succeeded++
			} else {
				lost++
				if lost <= 3 {
					errs = append(errs, fmt.Errorf("run %s: %s", id, describeRun(rn)))
				}
			}
		}
	}
	f.add("runs", len(ids))
	f.add("lost", lost)
	return errs
}

// watchReadiness polls a replica's readiness until the returned function is
// called; that function reports whether a 503 was seen (a draining node
// fails readiness before it stops listening).
func watchReadiness(ctx context.Context, h *harness, r int) func() bool {
	var saw atomic.Bool
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for wctx.Err() == nil {
			resp, err := h.call(wctx, r, http.MethodGet, "/healthz/ready", "", nil)
			if err == nil && resp.Status == http.StatusServiceUnavailable {
				saw.Store(true)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return func() bool { cancel(); wg.Wait(); return saw.Load() }
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// load is four users calling the API in a loop through the retrying client.
type load struct {
	h     *harness
	tasks map[*user]string // each user's fast task, triggered manually

	ok, failed, retried atomic.Int64
	mu                  sync.Mutex
	runs                map[string]*user
	errs                []error
}

func (h *harness) newLoad(ctx context.Context) (*load, error) {
	l := &load{h: h, tasks: map[*user]string{}, runs: map[string]*user{}}
	for i, name := range []string{"alice", "bob", "carol", "kim"} {
		u := h.users[name]
		l.tasks[u] = ""
		t, err := h.createTask(ctx, u, i%3, webhookTask("hacheck-load", manualOnly, h.rec.url("/fast/"+name, 0)))
		if err != nil {
			return l, err
		}
		l.tasks[u] = t.ID
	}
	return l, nil
}

// run starts the workers; the channel closes when they have stopped.
func (l *load) run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	i := 0
	for u, taskID := range l.tasks {
		w := i
		i++
		wg.Go(func() { l.worker(ctx, w, u, taskID) })
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

func (l *load) worker(ctx context.Context, w int, u *user, taskID string) {
	c := l.h.retrier()
	for i := w; ctx.Err() == nil; i++ {
		method, path, want := http.MethodGet, "/v1/me", http.StatusOK
		var body any
		switch i % 4 {
		case 1:
			path = "/v1/tasks?limit=5"
		case 2:
			if taskID == "" {
				break
			}
			method, path, want, body = http.MethodPost, "/v1/tasks/"+taskID+"/runs", http.StatusAccepted, struct{}{}
		case 3:
			method, path, want = http.MethodPost, "/v1/events", http.StatusAccepted
			body = map[string]any{"to": u.ID, "event": "hacheck.load", "payload": map[string]int{"n": i}}
		}
		resp, retries, err := c.do(ctx, i, method, path, u.Token, body)
		if ctx.Err() != nil {
			return
		}
		l.retried.Add(int64(retries))
		if err == nil && resp.Status != want {
			err = fmt.Errorf("%s %s: status %d: %s", method, path, resp.Status, truncate(string(resp.Body), 160))
		}
		if err != nil {
			l.fail(err)
		} else {
			l.ok.Add(1)
			if want == http.StatusAccepted && method == http.MethodPost && i%4 == 2 {
				var rn run
				if resp.decode(&rn) == nil && rn.ID != "" {
					l.mu.Lock()
					l.runs[rn.ID] = u
					l.mu.Unlock()
				}
			}
		}
		time.Sleep(40 * time.Millisecond) // ~25 req/s per user, under the per-user limit
	}
}

func (l *load) fail(err error) {
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 3 {
		l.errs = append(l.errs, err)
	}
}

func (l *load) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

func (l *load) runIDs() map[string]*user {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]*user, len(l.runs))
	for id, u := range l.runs {
		out[id] = u
	}
	return out
}
