package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// cronState is the every-second task that runs under every other check.
type cronState struct {
	task    *task
	created time.Time
	err     error
}

const tickPeriod = time.Second

// startCron creates the `@every 1s` webhook task (overlap allow, so a run
// stuck on a killed replica does not hold back later ticks).
func (h *harness) startCron(ctx context.Context) {
	body := webhookTask("hacheck-cron", "@every 1s", h.rec.url("/cron", 0))
	h.cron.created = time.Now()
	h.cron.task, h.cron.err = h.createTask(ctx, h.users["admin"], 0, body)
}

// checkCron stops the task, waits for its runs to finish, and counts: one
// run per tick over the whole test (dup = two runs within half a period,
// missing = a tick with no run outside a deliberate Postgres outage), and one
// delivered webhook-id per run.
func (h *harness) checkCron(ctx context.Context) (figures, error) {
	var f figures
	if h.cron.task == nil {
		return f, fmt.Errorf("no cron task: %w", h.cron.err)
	}
	admin := h.users["admin"]
	resp, _, err := h.retrier().do(ctx, 0, http.MethodPatch, "/v1/tasks/"+h.cron.task.ID, admin.Token, map[string]any{"active": false})
	if err != nil {
		return f, err
	}
	if err := checkStatus(resp, "PATCH", "/v1/tasks/{id}", 0, http.StatusOK, nil); err != nil {
		return f, err
	}
	stopped := time.Now()
	runs, unfinished, err := h.settledRuns(ctx, admin, h.cron.task.ID, 45*time.Second)
	if err != nil {
		return f, err
	}
	a := analyzeTicks(scheduledTimes(runs), tickPeriod, h.inOutage)
	a.addEdges(h.cron.created, stopped, h.inOutage)
	f.add("ticks", a.ticks)
	f.add("runs", len(runs))
	f.add("dup", a.dup)
	f.add("missing", a.missing)
	if a.excused > 0 {
		f.add("skipped_pg_down", a.excused)
	}
	succeeded, failed := countStatus(runs)
	f.add("succeeded", succeeded)
	if failed > 0 {
		f.add("failed", failed)
	}
	f.add("unfinished", unfinished)
	calls := callsByID(h.rec.matching("/cron"))
	f.add("delivered", len(calls))
	if n := repeats(calls); n > 0 {
		f.add("redelivered", n) // retries and rescues re-send the same webhook-id
	}
	p50, p99 := startLag(runs)
	f.add("lag_p50", p50)
	f.add("lag_p99", p99)

	var errs []error
	if len(runs) == 0 {
		errs = append(errs, errors.New("no runs at all"))
	}
	if a.dup > 0 || a.missing > 0 {
		errs = append(errs, fmt.Errorf("%d duplicate and %d missing ticks (first gaps: %v)", a.dup, a.missing, a.examples))
	}
	if unfinished > 0 {
		errs = append(errs, fmt.Errorf("%d runs never finished", unfinished))
	}
	errs = append(errs, deliveryErrors(runs, calls)...)
	return f, errors.Join(errs...)
}

// settledRuns waits until no run of the task is queued or running (or the
// time is up) and returns the scheduled runs and how many are unfinished.
func (h *harness) settledRuns(ctx context.Context, u *user, taskID string, d time.Duration) ([]run, int, error) {
	deadline := time.Now().Add(d)
	for {
		all, err := h.taskRuns(ctx, u, taskID)
		if err != nil {
			return nil, 0, err
		}
		var runs []run
		unfinished := 0
		for _, r := range all {
			if r.Trigger != "schedule" {
				continue
			}
			runs = append(runs, r)
			if !r.terminal() {
				unfinished++
			}
		}
		if unfinished == 0 || time.Now().After(deadline) {
			return runs, unfinished, nil
		}
		select {
		case <-ctx.Done():
			return runs, unfinished, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func scheduledTimes(runs []run) []time.Time {
	var ts []time.Time
	for _, r := range runs {
		if r.ScheduledFor != nil {
			ts = append(ts, *r.ScheduledFor)
		}
	}
	return ts
}

func countStatus(runs []run) (succeeded, failed int) {
	for _, r := range runs {
		switch r.Status {
		case "succeeded":
			succeeded++
		case "failed":
			failed++
		}
	}
	return
}

// callsByID counts the target's calls per webhook-id.
func callsByID(ds []delivery) map[string]int {
	calls := map[string]int{}
	for i, d := range ds {
		key := d.WebhookID
		if key == "" {
			key = fmt.Sprintf("no-id-%d", i) // without the header every call counts
		}
		calls[key]++
	}
	return calls
}

func repeats(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c - 1
	}
	return n
}

// deliveryErrors matches calls to runs. The webhook-id is the run id (a
// Standard Webhooks message id stable across retries), so: every succeeded
// run was called, and no call belongs to a run the API doesn't list (a tick
// executed under a second run). If the ids are not run ids, it compares
// counts instead.
func deliveryErrors(runs []run, calls map[string]int) []error {
	var errs []error
	known := map[string]bool{}
	matched, uncalled := 0, 0
	for _, r := range runs {
		known[r.ID] = true
		if calls[r.ID] > 0 {
			matched++
		} else if r.Status == "succeeded" {
			uncalled++
		}
	}
	succeeded, _ := countStatus(runs)
	if matched == 0 && len(calls) > 0 {
		if len(calls) != succeeded {
			errs = append(errs, fmt.Errorf("the target saw %d distinct webhook ids for %d succeeded runs", len(calls), succeeded))
		}
		return errs
	}
	if uncalled > 0 {
		errs = append(errs, fmt.Errorf("%d succeeded runs never called the target", uncalled))
	}
	foreign := 0
	for id := range calls {
		if !known[id] {
			foreign++
		}
	}
	if foreign > 0 {
		errs = append(errs, fmt.Errorf("the target was called for %d runs the API does not list", foreign))
	}
	return errs
}

// startLag is the p50 and p99 of started_at − scheduled_for.
func startLag(runs []run) (time.Duration, time.Duration) {
	var lags []time.Duration
	for _, r := range runs {
		if r.StartedAt != nil && r.ScheduledFor != nil {
			lags = append(lags, r.StartedAt.Sub(*r.ScheduledFor))
		}
	}
	return percentile(lags, 50), percentile(lags, 99)
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// tickAnalysis counts ticks from the scheduled times of runs.
type tickAnalysis struct {
	ticks, dup, missing, excused int
	first, last                  time.Time
	examples                     []string
}

// analyzeTicks sorts the scheduled times and walks the gaps: a gap under
// half a period is a duplicate, a gap of k periods hides k−1 ticks, which are
// missing unless excused (inside a deliberate outage).
func analyzeTicks(ts []time.Time, period time.Duration, excused func(time.Time) bool) tickAnalysis {
	var a tickAnalysis
	if len(ts) == 0 {
		return a
	}
	s := slices.Clone(ts)
	slices.SortFunc(s, func(x, y time.Time) int { return x.Compare(y) })
	a.first, a.last = s[0], s[len(s)-1]
	a.ticks = 1
	for i := 1; i < len(s); i++ {
		gap := s[i].Sub(s[i-1])
		k := int((gap + period/2) / period)
		if k == 0 {
			a.dup++
			a.note("dup at %s", s[i].Format("15:04:05.000"))
			continue
		}
		a.ticks++
		for j := 1; j < k; j++ {
			a.countHole(s[i-1].Add(time.Duration(j)*period), excused)
		}
	}
	return a
}

// addEdges counts ticks missing before the first run (the first tick is due
// within a period of creation) and after the last (up to the stop, less two
// periods for a claim in flight when the task was stopped).
func (a *tickAnalysis) addEdges(created, stopped time.Time, excused func(time.Time) bool) {
	if a.first.IsZero() {
		return
	}
	for t := a.first.Add(-tickPeriod); t.After(created.Add(tickPeriod)); t = t.Add(-tickPeriod) {
		a.countHole(t, excused)
	}
	for t := a.last.Add(tickPeriod); t.Before(stopped.Add(-2 * tickPeriod)); t = t.Add(tickPeriod) {
		a.countHole(t, excused)
	}
}

func (a *tickAnalysis) countHole(t time.Time, excused func(time.Time) bool) {
	a.ticks++
	if excused(t) {
		a.excused++
		return
	}
	a.missing++
	a.note("missing %s", t.Format("15:04:05.000"))
}

func (a *tickAnalysis) note(format string, args ...any) {
	if len(a.examples) < 5 {
		a.examples = append(a.examples, fmt.Sprintf(format, args...))
	}
}

// cronWindow analyses the cron ticks scheduled in [from, to]; to should be a
// few seconds in the past so those ticks had their chance to run.
func (h *harness) cronWindow(ctx context.Context, from, to time.Time) (tickAnalysis, error) {
	if h.cron.task == nil {
		return tickAnalysis{}, fmt.Errorf("no cron task: %w", h.cron.err)
	}
	all, err := h.taskRuns(ctx, h.users["admin"], h.cron.task.ID)
	if err != nil {
		return tickAnalysis{}, err
	}
	var ts []time.Time
	for _, r := range all {
		if r.Trigger == "schedule" && r.ScheduledFor != nil && !r.ScheduledFor.Before(from) && !r.ScheduledFor.After(to) {
			ts = append(ts, *r.ScheduledFor)
		}
	}
	a := analyzeTicks(ts, tickPeriod, h.inOutage)
	if len(ts) == 0 {
		a.missing = int(to.Sub(from) / tickPeriod)
		a.note("no runs between %s and %s", from.Format("15:04:05"), to.Format("15:04:05"))
		return a, nil
	}
	a.addEdges(from.Add(-tickPeriod), to.Add(2*tickPeriod), h.inOutage)
	return a, nil
}

// addWindow puts a window's tick counts into f and returns an error when a
// tick was missed or doubled.
func addWindow(f *figures, prefix string, a tickAnalysis, err error) error {
	if err != nil {
		f.add(prefix+"ticks", "?")
		return fmt.Errorf("cron ticks: %w", err)
	}
	f.add(prefix+"ticks", a.ticks)
	f.add(prefix+"missing", a.missing)
	f.add(prefix+"dup", a.dup)
	if a.missing > 0 || a.dup > 0 {
		return fmt.Errorf("cron ticks around the event: %d missing, %d duplicate (%v)", a.missing, a.dup, a.examples)
	}
	return nil
}
