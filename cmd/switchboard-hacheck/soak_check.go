package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// dbRun is a task_runs row as the soak's checker reads it.
type dbRun struct {
	ID, TaskID, Status, Trigger string
	ScheduledFor, CreatedAt     time.Time
	FinishedAt                  *time.Time
	Attempt, SkippedTicks       int
	HTTPStatus                  *int
	Excerpt, Error              *string
}

func (r dbRun) final() bool {
	return slices.Contains([]string{"succeeded", "failed", "cancelled"}, r.Status)
}

// dbAttempt is a task_run_attempts row.
type dbAttempt struct {
	RunID      string
	Attempt    int
	Status     string
	StartedAt  time.Time
	FinishedAt *time.Time
	HTTPStatus *int
	Excerpt    *string
}

// violation is one broken invariant: its kind (a short name the report
// counts by) and what exactly was seen.
type violation struct {
	kind, detail string
}

func violate(kind, format string, args ...any) violation {
	return violation{kind: kind, detail: fmt.Sprintf(format, args...)}
}

// inWindows reports whether t lies inside one of ws.
func inWindows(t time.Time, ws []window) bool {
	for _, w := range ws {
		if !t.Before(w.from) && !t.After(w.to) {
			return true
		}
	}
	return false
}

// cronSpan is what the checker knows of one every-second task: when it was
// created and when it was deactivated (both from the database's clock).
type cronSpan struct {
	task             string
	created, stopped time.Time
}

// cronStats are one task's tick counts.
type cronStats struct {
	ticks, runs, folded int
	maxLate             time.Duration
}

// maxClaimLag is how late a tick may be claimed while any replica can
// claim: "no due task is left unclaimed for more than 2 ticks" (DESIGN.md).
const maxClaimLag = 2 * tickPeriod

// catchUp is the claim loop's catch-up limit (jobs.ClaimerOptions.CatchUp,
// docs/jobs.md "Late and missed ticks"): a tick claimed at most this late
// still gets its own run. Ticks due in a database outage, or within this
// long after it, may be claimed that late while the replicas recover.
const catchUp = 10 * time.Second

// checkCronTask checks the scheduled runs of one every-second task: one run
// per tick from the first tick after creation to the last before the
// deactivation (less two ticks for a claim in flight then). A tick without
// a run is missing unless the run before it folded it (skipped_ticks,
// docs/jobs.md "Late and missed ticks"), which the design allows only for a
// tick claimed past the catch-up limit while no replica could reach the
// database (outages). A run claimed more than maxClaimLag after its tick is
// late, unless its tick was due in an outage, or in the catchUp after one
// and claimed within catchUp.
func checkCronTask(span cronSpan, runs []dbRun, outages []window) (cronStats, []violation) {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b dbRun) int { return a.ScheduledFor.Compare(b.ScheduledFor) })
	st := cronStats{runs: len(s)}
	if len(s) == 0 {
		return st, []violation{violate("cron_missing", "task %s: no run between %s and %s", span.task, clock(span.created), clock(span.stopped))}
	}
	// Before the first run: ticks more than a period after the creation.
	from := s[0].ScheduledFor
	for from.Add(-tickPeriod).After(span.created.Add(tickPeriod)) {
		from = from.Add(-tickPeriod)
	}
	vs := holes(span.task, from, s[0].ScheduledFor, outages)
	st.ticks += countTicks(from, s[0].ScheduledFor)
	for i, r := range s {
		st.ticks++
		vs = append(vs, lateClaim(span.task, r, outages, &st)...)
		if i+1 == len(s) {
			break
		}
		vs = append(vs, checkGap(span.task, r, s[i+1], outages, &st)...)
	}
	// After the last run: ticks up to two periods before the deactivation.
	last := s[len(s)-1].ScheduledFor
	end := last.Add(tickPeriod)
	for !end.After(span.stopped.Add(-2 * tickPeriod)) {
		end = end.Add(tickPeriod)
	}
	vs = append(vs, holes(span.task, last.Add(tickPeriod), end, outages)...)
	st.ticks += countTicks(last.Add(tickPeriod), end)
	return st, vs
}

// checkGap checks the ticks between two consecutive runs r and next: none
// (next is the following tick), a duplicate (next is within half a period),
// or some that r folded or that are missing.
func checkGap(task string, r, next dbRun, outages []window, st *cronStats) []violation {
	gap := next.ScheduledFor.Sub(r.ScheduledFor)
	if gap < tickPeriod/2 {
		st.ticks--
		return []violation{violate("cron_duplicate", "task %s: runs %s and %s for ticks %s and %s", task, r.ID, next.ID, clock(r.ScheduledFor), clock(next.ScheduledFor))}
	}
	between := int((gap+tickPeriod/2)/tickPeriod) - 1
	folded := min(between, r.SkippedTicks)
	st.ticks += between
	st.folded += folded
	var vs []violation
	if folded > 0 && !inWindows(r.ScheduledFor, outages) {
		vs = append(vs, violate("cron_folded", "task %s: run %s for %s folded %d later ticks while replicas could claim", task, r.ID, clock(r.ScheduledFor), folded))
	}
	if between > folded {
		vs = append(vs, holes(task, r.ScheduledFor.Add(time.Duration(folded+1)*tickPeriod), next.ScheduledFor, outages)...)
	}
	return vs
}

// countTicks counts the ticks from from, a period apart, before to (less
// half a period).
func countTicks(from, to time.Time) int {
	n := 0
	for t := from; t.Before(to.Add(-tickPeriod / 2)); t = t.Add(tickPeriod) {
		n++
	}
	return n
}

// holes reports each tick in [from, to) as missing: no run, and no run
// that folded it.
func holes(task string, from, to time.Time, outages []window) []violation {
	n := countTicks(from, to)
	if n == 0 {
		return nil
	}
	where := ""
	if inWindows(from, outages) {
		where = " (in a database outage, where a tick is claimed late or folded, never lost)"
	}
	return []violation{violate("cron_missing", "task %s: %d ticks without a run from %s%s", task, n, clock(from), where)}
}

// lateClaim reports a run claimed over maxClaimLag after its tick (the
// run's created_at is its claim) outside an outage.
func lateClaim(task string, r dbRun, outages []window, st *cronStats) []violation {
	late := r.CreatedAt.Sub(r.ScheduledFor)
	st.maxLate = max(st.maxLate, late)
	if late <= maxClaimLag || inWindows(r.ScheduledFor, outages) || (late <= catchUp && inWindows(r.ScheduledFor, recovering(outages))) {
		return nil
	}
	return []violation{violate("cron_late", "task %s: tick %s claimed %s late (run %s) while replicas could claim", task, clock(r.ScheduledFor), late.Round(time.Millisecond), r.ID)}
}

// recovering are the outages, each extended by catchUp past its end.
func recovering(outages []window) []window {
	ws := make([]window, len(outages))
	for i, w := range outages {
		ws[i] = window{from: w.from, to: w.to.Add(catchUp)}
	}
	return ws
}

// checkFinal reports every run that is not succeeded or failed, and every
// run the reconciliation finished (docs/jobs.md "No orphaned runs": its
// last outcome was never recorded, although a worker retries that write
// for longer than any fault lasts). The soak cancels nothing, so a
// cancelled run is a River job cancelled under a run that was not.
func checkFinal(runs []dbRun) []violation {
	var vs []violation
	for _, r := range runs {
		switch {
		case r.Status == "cancelled":
			vs = append(vs, violate("run_cancelled", "run %s of task %s ended cancelled (attempt %d: %s); the soak cancels nothing", r.ID, r.TaskID, r.Attempt, strOrNil(r.Error)))
		case !r.final():
			vs = append(vs, violate("run_not_final", "run %s of task %s is %s (attempt %d) after the drain", r.ID, r.TaskID, r.Status, r.Attempt))
		case r.Error != nil && strings.HasPrefix(*r.Error, "reconciled:"):
			vs = append(vs, violate("run_reconciled", "run %s of task %s ended %s by reconciliation: %s", r.ID, r.TaskID, r.Status, *r.Error))
		}
	}
	return vs
}

func clock(t time.Time) string { return t.Local().Format("15:04:05.000") }
