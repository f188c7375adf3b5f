package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// checkKillOnDemand: kill -9 a replica while it serves a cancel of one of
// its own running runs and a backfill. Afterwards nothing is left
// non-final, the cancelled run ends cancelled or (when the cancel had not
// committed) rescued to success, and a repeated backfill on a survivor
// leaves exactly one run per tick.
func (h *harness) checkKillOnDemand(ctx context.Context) (figures, error) {
	var f figures
	var errs []error
	u := h.users["carol"]
	runOf, err := h.slowRuns(ctx, u, "/slow/odkill-", 3, 8000)
	if err != nil {
		return f, err
	}
	victim, victimPaths := h.pickVictim(ctx, "/slow/odkill-", runOf)
	if len(victimPaths) == 0 {
		return f, errors.New("no slow run seen running on a known replica; nothing to cancel there")
	}
	vr := h.cl.replicas[victim]
	alt := (victim + 1) % len(h.cl.replicas)
	f.add("victim", vr.Name())
	body := webhookTask("hacheck-backfill", "* * * * * *", h.rec.url("/backfill/", 0)) // every second, at fixed instants
	body["active"] = false
	bt, err := h.createTask(ctx, u, alt, body)
	if err != nil {
		return f, err
	}
	// The largest backfill (1000 ticks): the longest transaction to kill.
	const ticks = 1000
	to := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	span := map[string]any{"from": to.Add(-ticks * time.Second), "to": to}
	cancelled := runOf[victimPaths[0]]

	var wg sync.WaitGroup
	var cancelStatus, backfillStatus int
	wg.Go(func() {
		if resp, err := h.call(ctx, victim, http.MethodPost, "/v1/runs/"+cancelled+"/cancel", u.Token, struct{}{}); err == nil {
			cancelStatus = resp.Status
		}
	})
	wg.Go(func() {
		if resp, err := h.call(ctx, victim, http.MethodPost, "/v1/tasks/"+bt.ID+"/backfill", u.Token, span); err == nil {
			backfillStatus = resp.Status
		}
	})
	time.Sleep(30 * time.Millisecond) // race the kill against both requests
	if err := vr.Kill(); err != nil {
		return f, err
	}
	wg.Wait()
	f.add("cancel_answered", cancelStatus)
	f.add("backfill_answered", backfillStatus)

	var again struct {
		Ticks   int `json:"ticks"`
		Created int `json:"created"`
	}
	if err := h.expect(ctx, alt, http.MethodPost, "/v1/tasks/"+bt.ID+"/backfill", u.Token, span, http.StatusAccepted, &again); err != nil {
		errs = append(errs, fmt.Errorf("backfill again on a survivor: %w", err))
	}
	f.add("backfill_created_after_kill", again.Created)
	errs = append(errs, h.checkBackfilled(ctx, &f, u, bt.ID, to, ticks)...)

	runs, err := h.waitTerminal(ctx, u, []string{cancelled}, h.opts.profile.rescue)
	if err != nil {
		errs = append(errs, fmt.Errorf("the run cancelled during the kill: %w", err))
	} else if st := runs[cancelled].Status; st != "cancelled" && st != "succeeded" {
		errs = append(errs, fmt.Errorf("the run cancelled during the kill ended %s", st))
	} else {
		f.add("cancel_outcome", st)
	}
	if err := h.restartRejoin(ctx, &f, victim, alt); err != nil {
		errs = append(errs, err)
	}
	return f, errors.Join(errs...)
}

// checkBackfilled: the backfilled task has exactly one run per tick before
// to, and every one of them finishes.
func (h *harness) checkBackfilled(ctx context.Context, f *figures, u *user, taskID string, to time.Time, ticks int) []error {
	all, err := h.taskRuns(ctx, u, taskID)
	if err != nil {
		return []error{err}
	}
	seen := map[time.Time]int{}
	var ids []string
	for _, r := range all {
		if r.ScheduledFor != nil && r.ScheduledFor.Before(to) {
			seen[r.ScheduledFor.UTC()]++
			ids = append(ids, r.ID)
		}
	}
	var errs []error
	if len(seen) != ticks || len(ids) != ticks {
		errs = append(errs, fmt.Errorf("backfill: %d runs over %d ticks, want %d of each", len(ids), len(seen), ticks))
	}
	runs, err := h.waitTerminal(ctx, u, ids, h.opts.profile.rescue)
	if err != nil {
		errs = append(errs, fmt.Errorf("backfilled runs: %w", err))
	}
	redelivered := 0
	calls := map[string]int{}
	for _, d := range h.rec.matching("/backfill/") {
		calls[d.WebhookID]++
	}
	for id, r := range runs {
		if r.Status != "succeeded" {
			errs = append(errs, fmt.Errorf("backfilled run %s ended %s", id, r.Status))
		}
		if calls[id] > 1 {
			redelivered++
		}
	}
	f.add("backfill_runs", len(ids))
	f.add("backfill_redelivered", redelivered)
	return errs
}
