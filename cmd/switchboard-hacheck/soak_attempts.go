package main

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// attemptStats count what the attempt check saw.
type attemptStats struct {
	calls, attempts, interrupted int
}

// checkAttempts compares the target's call log with the attempts table and
// the runs (every run given must call the target, and be final):
//   - no attempt called twice: River numbers each fetch of a job, so two
//     calls naming one run and attempt are one attempt executed twice;
//   - every call has its attempt's record;
//   - a record that kept an answer (its excerpt names a call) kept the
//     answer of a call of that very run and attempt, with its status;
//   - records are written in attempt order: an attempt's record finished
//     before the next attempt started (a late worker's write would finish
//     after it);
//   - a final run agrees with its last attempt: the same attempt number,
//     and a succeeded run has that attempt's answer.
func checkAttempts(runs []dbRun, attempts []dbAttempt, calls []call) (attemptStats, []violation) {
	st := attemptStats{calls: len(calls), attempts: len(attempts)}
	byRun := map[string][]dbAttempt{}
	for _, a := range attempts {
		byRun[a.RunID] = append(byRun[a.RunID], a)
		if a.Status == "interrupted" {
			st.interrupted++
		}
	}
	var vs []violation
	vs = append(vs, checkCalls(calls, byRun)...)
	vs = append(vs, checkRecords(attempts, calls)...)
	for _, r := range runs {
		as := byRun[r.ID]
		slices.SortFunc(as, func(a, b dbAttempt) int { return cmp.Compare(a.Attempt, b.Attempt) })
		vs = append(vs, checkOrder(r.ID, as)...)
		vs = append(vs, checkRunAgrees(r, as)...)
	}
	return st, vs
}

// checkCalls: each (run, attempt) called at most once, and recorded.
func checkCalls(calls []call, byRun map[string][]dbAttempt) []violation {
	seen := map[runAttempt]call{}
	var vs []violation
	for _, c := range calls {
		k := runAttempt{c.RunID, c.Attempt}
		if prev, ok := seen[k]; ok {
			vs = append(vs, violate("attempt_called_twice", "%s: called by %s at %s and by %s at %s", k, replicaName(prev.Replica), clock(prev.At), replicaName(c.Replica), clock(c.At)))
			continue
		}
		seen[k] = c
		if !slices.ContainsFunc(byRun[c.RunID], func(a dbAttempt) bool { return a.Attempt == c.Attempt }) {
			vs = append(vs, violate("attempt_unrecorded", "%s: called at %s (answered %d) but never recorded", k, clock(c.At), c.Status))
		}
	}
	return vs
}

// checkRecords: a record holding a call's answer holds one of its own
// calls' answer, with the status the target gave.
func checkRecords(attempts []dbAttempt, calls []call) []violation {
	var vs []violation
	for _, a := range attempts {
		if a.Excerpt == nil {
			continue
		}
		k := runAttempt{a.RunID, a.Attempt}
		seq, ok := callOfExcerpt(*a.Excerpt)
		switch {
		case !ok || seq < 0 || seq >= int64(len(calls)):
			vs = append(vs, violate("attempt_foreign_answer", "%s: recorded an answer the target never gave: %.80q", k, *a.Excerpt))
		case calls[seq].RunID != a.RunID || calls[seq].Attempt != a.Attempt:
			c := calls[seq]
			vs = append(vs, violate("attempt_overwritten", "%s (%s) holds the answer of call %d, which was run %s attempt %d", k, a.Status, seq, c.RunID, c.Attempt))
		case a.HTTPStatus == nil || *a.HTTPStatus != calls[seq].Status:
			vs = append(vs, violate("attempt_wrong_status", "%s: recorded status %s, the target answered %d", k, intOrNil(a.HTTPStatus), calls[seq].Status))
		}
	}
	return vs
}

// checkOrder: each record of a run finished before the next attempt
// started (as sorted by attempt).
func checkOrder(runID string, as []dbAttempt) []violation {
	var vs []violation
	for i := 1; i < len(as); i++ {
		prev, next := as[i-1], as[i]
		if prev.FinishedAt != nil && prev.FinishedAt.After(next.StartedAt) {
			vs = append(vs, violate("attempt_late_write", "run %s: attempt %d (%s) recorded at %s, after attempt %d started at %s",
				runID, prev.Attempt, prev.Status, clock(*prev.FinishedAt), next.Attempt, clock(next.StartedAt)))
		}
	}
	return vs
}

// checkRunAgrees: a final run is its last attempt's outcome (a run the
// reconciliation finished is reported as such by checkFinal).
func checkRunAgrees(r dbRun, as []dbAttempt) []violation {
	if !r.final() || r.Status == "cancelled" || (r.Error != nil && strings.HasPrefix(*r.Error, "reconciled:")) {
		return nil
	}
	if len(as) == 0 {
		return []violation{violate("run_without_attempts", "run %s is %s with no attempt recorded", r.ID, r.Status)}
	}
	last := as[len(as)-1]
	switch {
	case last.Attempt != r.Attempt:
		return []violation{violate("run_disagrees", "run %s is %s on attempt %d, but its last recorded attempt is %d (%s)", r.ID, r.Status, r.Attempt, last.Attempt, last.Status)}
	case r.Status == "succeeded" && (last.Status != "succeeded" || strOrNil(last.Excerpt) != strOrNil(r.Excerpt)):
		return []violation{violate("run_disagrees", "run %s succeeded with answer %s, but its attempt %d is %s with answer %s", r.ID, strOrNil(r.Excerpt), last.Attempt, last.Status, strOrNil(last.Excerpt))}
	case r.Status == "failed" && last.Status != "failed" && last.Status != "interrupted":
		return []violation{violate("run_disagrees", "run %s failed, but its attempt %d is %s", r.ID, last.Attempt, last.Status)}
	}
	return nil
}

func strOrNil(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

func intOrNil(i *int) string {
	if i == nil {
		return "null"
	}
	return strconv.Itoa(*i)
}
