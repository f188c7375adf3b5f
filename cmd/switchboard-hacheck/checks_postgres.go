package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// checkPostgresRestart: stop PostgreSQL (fast shutdown) and start it again
// on the same port. Every replica's readiness goes 503 and back, no process
// dies, the LISTEN connection comes back (a cross-replica event arrives),
// scheduling resumes, and no tick runs twice.
func (h *harness) checkPostgresRestart(ctx context.Context) (figures, error) {
	var f figures
	if h.cl.pg == nil {
		return f, fmt.Errorf("DATABASE_URL given, its server is not ours to restart: %w", errSkip)
	}
	var errs []error
	down := time.Now()
	if err := h.cl.stopPostgres(); err != nil {
		return f, fmt.Errorf("stop postgres: %w", err)
	}
	unready, err := h.waitAllReadiness(ctx, http.StatusServiceUnavailable, 10*time.Second)
	f.add("ready_503_after", unready)
	if err != nil {
		errs = append(errs, err)
	}
	for i := range h.cl.replicas {
		if err := h.expect(ctx, i, http.MethodGet, "/healthz/live", "", nil, http.StatusOK, nil); err != nil {
			errs = append(errs, fmt.Errorf("while postgres is down: %w", err))
		}
	}
	sleepCtx(ctx, time.Until(down.Add(h.opts.profile.pgDown)))
	if err := h.cl.restartPostgres(ctx); err != nil {
		return f, errors.Join(append(errs, fmt.Errorf("start postgres again: %w", err))...)
	}
	up := time.Now()
	f.add("down", up.Sub(down))
	ready, err := h.waitAllReadiness(ctx, http.StatusOK, 30*time.Second)
	f.add("ready_after", ready)
	// Ticks due while the database was away, or before every claim loop
	// had its connection back, may be folded into one run by design.
	h.addOutage(window{from: down.Add(-tickPeriod), to: up.Add(ready + 2*time.Second)})
	if err != nil {
		return f, errors.Join(append(errs, err)...)
	}
	errs = append(errs, h.afterOutage(ctx, &f, outage{down: down, up: up, ready: ready,
		during: "while postgres was down", after: "after the restart", skipped: "skipped_pg_down"})...)
	return f, errors.Join(errs...)
}

// outage is a database outage a check caused: from down until the server
// answered again (up) and every replica was ready (ready after up), with
// how its messages and figures name it.
type outage struct {
	down, up               time.Time
	ready                  time.Duration
	during, after, skipped string
}

// afterOutage checks what must hold once every replica is ready again after
// o: no replica died, LISTEN reconnected (a cross-replica event arrives),
// scheduling resumed, and no tick ran twice or went missing around it
// (ticks folded by the outage are counted in o.skipped).
func (h *harness) afterOutage(ctx context.Context, f *figures, o outage) []error {
	var errs []error
	for _, r := range h.cl.replicas {
		if !r.Running() {
			errs = append(errs, fmt.Errorf("%s died %s: %v", r.Name(), o.during, r.ExitErr()))
		}
	}
	if d, err := h.crossReplicaEvent(ctx); err != nil {
		errs = append(errs, fmt.Errorf("%s (LISTEN reconnect): %w", o.after, err))
	} else {
		f.add("event_r3_to_r1", d)
	}
	if h.cron.task == nil {
		return errs
	}
	resumed, err := h.waitCronAfter(ctx, o.up.Add(o.ready), 10*time.Second)
	if err != nil {
		errs = append(errs, err)
	} else {
		f.add("cron_resumed", resumed)
	}
	sleepCtx(ctx, 3*time.Second)
	from := o.down.Add(-5 * time.Second)
	if from.Before(h.cron.created) { // run alone (-run): the task is younger
		from = h.cron.created.Add(tickPeriod)
	}
	a, err := h.cronWindow(ctx, from, time.Now().Add(-3*time.Second))
	if err := addWindow(f, "", a, err); err != nil {
		errs = append(errs, err)
	}
	f.add(o.skipped, a.excused)
	return errs
}

// waitAllReadiness polls every replica's readiness until all answer want; it
// returns how long that took.
func (h *harness) waitAllReadiness(ctx context.Context, want int, d time.Duration) (time.Duration, error) {
	began := time.Now()
	pending := map[int]string{}
	for i := range h.cl.replicas {
		pending[i] = "no answer"
	}
	for len(pending) > 0 && time.Since(began) < d {
		for i := range pending {
			resp, err := h.call(ctx, i, http.MethodGet, "/healthz/ready", "", nil)
			switch {
			case err != nil:
				pending[i] = err.Error()
			case resp.Status == want:
				delete(pending, i)
			default:
				pending[i] = fmt.Sprintf("%d %s", resp.Status, truncate(string(resp.Body), 120))
			}
		}
		if len(pending) > 0 {
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}
	if len(pending) > 0 {
		return time.Since(began), fmt.Errorf("readiness not %d on %d replicas within %s: %v", want, len(pending), d, pending)
	}
	return time.Since(began), nil
}

// crossReplicaEvent posts an event through r3 to alice's fresh socket on r1
// and returns how long it took to arrive.
func (h *harness) crossReplicaEvent(ctx context.Context) (time.Duration, error) {
	alice, bob := h.users["alice"], h.users["bob"]
	s, err := h.openSocket(ctx, alice, 0, 0)
	if err != nil {
		return 0, err
	}
	defer s.close()
	nonce := fmt.Sprintf("pg-%d", time.Now().UnixNano())
	sent := time.Now()
	body := map[string]any{"to": alice.ID, "event": "hacheck.ping", "payload": map[string]string{"nonce": nonce}}
	if err := h.expect(ctx, 2, http.MethodPost, "/v1/events", bob.Token, body, http.StatusAccepted, nil); err != nil {
		return 0, err
	}
	fr, err := s.waitFor(ctx, 5*time.Second, func(fr frame) bool {
		return fr.Event == "hacheck.ping" && payloadField(fr, "nonce") == nonce
	})
	if err != nil {
		return 0, err
	}
	return fr.at.Sub(sent), nil
}

// waitCronAfter waits for a cron run scheduled after t and returns how long
// after t it was scheduled.
func (h *harness) waitCronAfter(ctx context.Context, t time.Time, d time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		runs, err := h.taskRuns(ctx, h.users["admin"], h.cron.task.ID)
		if err != nil {
			return 0, err
		}
		for _, r := range runs {
			if r.ScheduledFor != nil && r.ScheduledFor.After(t) && r.StartedAt != nil {
				return r.StartedAt.Sub(t), nil
			}
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	return 0, fmt.Errorf("no cron run started within %s after postgres came back", d)
}
