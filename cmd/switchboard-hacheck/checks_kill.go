package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"
)

// checkKill: kill -9 the replica running the most of four slow (3 s) jobs.
// The other two keep serving; the cron task keeps getting exactly one run
// per tick; the killed replica's jobs finish on another node; its WebSocket
// client reconnects to a live replica and gets the rescued run's event; the
// restarted replica rejoins /v1/cluster/status.
func (h *harness) checkKill(ctx context.Context) (figures, error) {
	var f figures
	var errs []error
	kim := h.users["kim"]
	socks := make([]*socket, len(h.cl.replicas))
	for i := range socks {
		s, err := h.openSocket(ctx, kim, i, i)
		if err != nil {
			errs = append(errs, fmt.Errorf("kim's socket on r%d: %w", i+1, err))
			continue
		}
		socks[i] = s
		defer s.close()
	}
	runOf, err := h.slowRuns(ctx, kim, "/slow/kill-", 4, 3000)
	if err != nil {
		errs = append(errs, err)
	}
	victim, victimRuns := h.pickVictim(ctx, "/slow/kill-", runOf)
	vr := h.cl.replicas[victim]
	f.add("victim", vr.Name())
	f.add("jobs_on_victim", len(victimRuns))
	if len(runOf) > 0 && len(victimRuns) == 0 {
		errs = append(errs, errors.New("no slow job seen running on a known replica; the kill tests no rescue"))
	}

	killAt := time.Now()
	if err := vr.Kill(); err != nil {
		return f, errors.Join(append(errs, err)...)
	}
	served, failed := h.probeSurvivors(ctx, victim, kim, 3*time.Second)
	f.add("survivor_requests", served)
	f.add("survivor_failed", failed)
	if failed > 0 {
		errs = append(errs, fmt.Errorf("%d requests to the surviving replicas failed after the kill", failed))
	}

	alt := (victim + 1) % len(h.cl.replicas)
	resock, err := h.reconnect(ctx, &f, kim, socks[victim], alt)
	if err != nil {
		errs = append(errs, err)
	} else if resock != nil {
		defer resock.close()
	}

	errs = append(errs, h.checkRescue(ctx, &f, kim, runOf, victimRuns, victim, killAt, resock)...)

	if err := h.restartRejoin(ctx, &f, victim, alt); err != nil {
		errs = append(errs, err)
	}
	if h.cron.task != nil {
		a, err := h.cronWindow(ctx, killAt.Add(-2*time.Second), time.Now().Add(-3*time.Second))
		if err := addWindow(&f, "", a, err); err != nil {
			errs = append(errs, err)
		}
	}
	return f, errors.Join(errs...)
}

// reconnect: the killed replica's socket ends, and its user connects to
// replica alt instead (nil socket when there was none to begin with).
func (h *harness) reconnect(ctx context.Context, f *figures, u *user, old *socket, alt int) (*socket, error) {
	if old == nil {
		return nil, nil
	}
	if !old.waitEnded(5 * time.Second) {
		return nil, errors.New("the killed replica's socket stayed open")
	}
	began := time.Now()
	s, err := h.openSocket(ctx, u, alt, alt)
	if err != nil {
		return nil, fmt.Errorf("reconnect to r%d: %w", alt+1, err)
	}
	f.add("reconnect", time.Since(began))
	return s, nil
}

// restartRejoin starts replica r again and waits until replica asker lists
// it as a live node.
func (h *harness) restartRejoin(ctx context.Context, f *figures, r, asker int) error {
	vr := h.cl.replicas[r]
	restartAt := time.Now()
	if err := vr.Start(); err != nil {
		return err
	}
	if err := vr.WaitReady(ctx, 60*time.Second); err != nil {
		return err
	}
	f.add("restart_ready", time.Since(restartAt))
	d, err := h.waitRejoined(ctx, asker, vr.Addr(), restartAt, 20*time.Second)
	if err != nil {
		return fmt.Errorf("restarted %s: %w", vr.Name(), err)
	}
	f.add("rejoined", d)
	return nil
}

// slowRuns creates n tasks calling prefix<i> (answered after ms) and
// triggers one run of each, through the replicas in turn. It maps each
// path to its run id.
func (h *harness) slowRuns(ctx context.Context, u *user, prefix string, n, ms int) (map[string]string, error) {
	runOf := map[string]string{}
	for i := range n {
		path := fmt.Sprintf("%s%d", prefix, i)
		r := i % len(h.cl.replicas)
		t, err := h.createTask(ctx, u, r, webhookTask("hacheck-slow", manualOnly, h.rec.url(path, ms)))
		if err != nil {
			return runOf, err
		}
		rn, err := h.trigger(ctx, u, r, t.ID)
		if err != nil {
			return runOf, err
		}
		runOf[path] = rn.ID
	}
	return runOf, nil
}

// pickVictim waits until the slow jobs are running and picks the replica
// running the most of them (r2 when none is seen). It returns the paths of
// the jobs that replica was running.
func (h *harness) pickVictim(ctx context.Context, prefix string, runOf map[string]string) (int, []string) {
	if len(runOf) == 0 {
		return 1, nil
	}
	ds, _ := h.rec.waitFor(ctx, prefix, 10*time.Second, func(ds []delivery) bool { return len(ds) >= len(runOf) })
	on := map[int][]string{}
	for _, d := range ds {
		if d.End.IsZero() && d.Replica >= 0 {
			on[d.Replica] = append(on[d.Replica], d.Path)
		}
	}
	victim := -1
	for r, paths := range on {
		if victim < 0 || len(paths) > len(on[victim]) {
			victim = r
		}
	}
	if victim < 0 {
		return 1, nil
	}
	sort.Strings(on[victim])
	return victim, on[victim]
}

// probeSurvivors asks every other replica for readiness and /v1/me every
// 100 ms for d; it returns how many requests were answered and how many
// failed.
func (h *harness) probeSurvivors(ctx context.Context, victim int, u *user, d time.Duration) (served, failed int) {
	stop := time.Now().Add(d)
	for time.Now().Before(stop) && ctx.Err() == nil {
		for i := range h.cl.replicas {
			if i == victim {
				continue
			}
			for _, p := range []struct{ path, token string }{{"/healthz/ready", ""}, {"/v1/me", u.Token}} {
				resp, err := h.call(ctx, i, http.MethodGet, p.path, p.token, nil)
				if err != nil || resp.Status != http.StatusOK {
					failed++
				} else {
					served++
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return served, failed
}

// checkRescue: every job the killed replica was running ends succeeded,
// called again by another replica; the reconnected socket hears of it; the
// other slow runs succeed as usual.
func (h *harness) checkRescue(ctx context.Context, f *figures, u *user, runOf map[string]string, victimPaths []string, victim int, killAt time.Time, resock *socket) []error {
	if len(runOf) == 0 {
		return nil
	}
	var errs []error
	var ids []string
	for _, id := range runOf {
		ids = append(ids, id)
	}
	runs, err := h.waitTerminal(ctx, u, ids, h.opts.profile.rescue)
	f.add("rescued_after", time.Since(killAt))
	if err != nil {
		errs = append(errs, fmt.Errorf("after kill -9: %w", err))
	}
	rescued := 0
	for _, path := range victimPaths {
		rn := runs[runOf[path]]
		if rn == nil || rn.Status != "succeeded" {
			errs = append(errs, fmt.Errorf("run %s of the killed replica: %s", runOf[path], describeRun(rn)))
			continue
		}
		if !h.deliveredElsewhere(path, victim) {
			errs = append(errs, fmt.Errorf("run %s succeeded but no other replica called its webhook", rn.ID))
			continue
		}
		rescued++
		if resock != nil {
			if _, err := resock.waitFor(ctx, 5*time.Second, isRunEvent("task.run.succeeded", rn.ID)); err != nil {
				errs = append(errs, fmt.Errorf("reconnected socket, task.run.succeeded of the rescued run: %w", err))
			}
		}
	}
	f.add("rescued", rescued)
	for path, id := range runOf {
		if rn := runs[id]; rn == nil || rn.Status != "succeeded" {
			if !slices.Contains(victimPaths, path) {
				errs = append(errs, fmt.Errorf("run %s (not on the killed replica): %s", id, describeRun(rn)))
			}
		}
	}
	return errs
}

func (h *harness) deliveredElsewhere(path string, victim int) bool {
	for _, d := range h.rec.matching(path) {
		if d.Path == path && !d.End.IsZero() && d.Replica != victim {
			return true
		}
	}
	return false
}

func describeRun(rn *run) string {
	if rn == nil {
		return "never read"
	}
	s := fmt.Sprintf("status %s, attempt %d", rn.Status, rn.Attempt)
	if rn.Error != nil {
		s += ", error " + truncate(*rn.Error, 120)
	}
	return s
}
