package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/switchboard/switchboard/jobs"
)

// soakResult is what the checker found.
type soakResult struct {
	faults     []injected
	unready    []window // spans in which no replica was ready
	cron       cronStats
	attempts   attemptStats
	keys       keyStats
	stream     streamAudit
	events     int // acknowledged
	reconnects int
	drained    time.Duration
	jobs       map[string]int
	violations []violation
}

// drainAndCheck stops the every-second tasks, waits (at most drainWithin)
// until every run is final and the follower has every acknowledged event,
// then checks the invariants.
func (s *soakRun) drainAndCheck(ctx context.Context) (soakResult, error) {
	res := soakResult{faults: s.inj.faults(), unready: s.ready.unready()}
	began := time.Now()
	stopped, err := s.stopCron(ctx)
	if err != nil {
		return res, err
	}
	all := append(slices.Clone(s.od), s.cronIDs()...)
	s.waitDrained(ctx, all)
	acked := s.pub.ackedIDs()
	_, _ = s.nc.waitIDs(ctx, acked, time.Minute) // what is still missing is reported below
	res.drained = time.Since(began)
	for i := range s.crons {
		s.crons[i].stopped = stopped
	}
	if err := s.check(ctx, &res, all, acked); err != nil {
		return res, err
	}
	res.jobs, _ = jobs.RunJobStates(ctx, s.db)
	return res, nil
}

// stopCron deactivates the every-second tasks and returns the database's
// time once they are.
func (s *soakRun) stopCron(ctx context.Context) (time.Time, error) {
	for _, c := range s.crons {
		resp, _, err := s.h.retrier().do(ctx, 0, http.MethodPatch, "/v1/tasks/"+c.task, s.h.users["alice"].Token, map[string]any{"active": false})
		if err != nil {
			return time.Time{}, fmt.Errorf("stop task %s: %w", c.task, err)
		}
		if err := checkStatus(resp, "PATCH", "/v1/tasks/{id}", 0, http.StatusOK, nil); err != nil {
			return time.Time{}, err
		}
	}
	return dbNow(ctx, s.db)
}

// waitDrained waits until no run of the tasks is queued or running.
func (s *soakRun) waitDrained(ctx context.Context, tasks []string) {
	deadline := time.Now().Add(drainWithin)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := unfinished(ctx, s.db, tasks); err == nil && n == 0 {
			return
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

func (s *soakRun) cronIDs() []string {
	var ids []string
	for _, c := range s.crons {
		ids = append(ids, c.task)
	}
	return ids
}

// check reads the runs, attempts and keys and checks every invariant.
func (s *soakRun) check(ctx context.Context, res *soakResult, all, acked []string) error {
	runs, err := readRuns(ctx, s.db, all)
	if err != nil {
		return err
	}
	attempts, err := readAttempts(ctx, s.db, all)
	if err != nil {
		return err
	}
	keys, err := readKeys(ctx, s.db, s.od)
	if err != nil {
		return err
	}
	// Ticks may wait while every replica is down, stopped or cut off
	// from PostgreSQL: in its restarts, and whenever no replica was ready.
	outages := append(dbOutages(res.faults), noneReady(res.unready)...)
	for _, f := range res.faults {
		if f.err != nil {
			res.violations = append(res.violations, violate("fault_not_recovered", "%s on %s at %s: %v", f.kind, replicaName(f.replica), clock(f.at), f.err))
		}
	}
	res.violations = append(res.violations, s.checkCron(runs, outages, res)...)
	res.violations = append(res.violations, checkFinal(runs)...)
	var vs []violation
	res.attempts, vs = checkAttempts(runs, attempts, s.target.snapshot())
	res.violations = append(res.violations, vs...)
	res.keys, vs = checkKeys(s.trig.snapshot(), keys, runsOf(runs, s.od))
	res.violations = append(res.violations, vs...)
	res.violations = append(res.violations, s.checkStream(res, acked)...)
	res.violations = append(res.violations, s.checkLogs()...)
	return nil
}

// checkCron checks each every-second task and sums their counts.
func (s *soakRun) checkCron(runs []dbRun, outages []window, res *soakResult) []violation {
	var vs []violation
	for _, c := range s.crons {
		var mine []dbRun
		for _, r := range runsOf(runs, []string{c.task}) {
			if r.Trigger == "schedule" {
				mine = append(mine, r)
			}
		}
		st, v := checkCronTask(c, mine, outages)
		vs = append(vs, v...)
		res.cron.ticks += st.ticks
		res.cron.runs += st.runs
		res.cron.folded += st.folded
		res.cron.maxLate = max(res.cron.maxLate, st.maxLate)
	}
	return vs
}

// checkStream: every acknowledged event received once, in order; every
// event published was acknowledged; the follower reported no reset or gap.
func (s *soakRun) checkStream(res *soakResult, acked []string) []violation {
	evs, opens, notes := s.nc.snapshot()
	res.stream = auditStream(evs, acked, s.pub.stream())
	res.events, res.reconnects = len(acked), len(opens)-1
	var vs []violation
	a := res.stream
	if a.dup > 0 || a.missing > 0 || a.badOffsets > 0 {
		vs = append(vs, violate("stream", "%d acknowledged events of %d missing, %d received twice, %d out of order (%s)", a.missing, len(acked), a.dup, a.badOffsets, a.firstBad))
	}
	if n := len(s.publishedIDs()) - len(acked); n > 0 {
		vs = append(vs, violate("stream_unacknowledged", "%d events never acknowledged within 30 s of retries (last error: %v)", n, s.pub.lastError()))
	}
	for _, n := range notes {
		vs = append(vs, violate("stream_client", "the follower reported %s", n))
	}
	return vs
}

func (s *soakRun) publishedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.published)
}

// checkLogs: no replica panicked or wrote a line that is not JSON.
func (s *soakRun) checkLogs() []violation {
	var vs []violation
	for i, r := range s.h.cl.replicas {
		st, err := scanLog(r.LogPath())
		switch {
		case err != nil:
			vs = append(vs, violate("log", "%s: %v", replicaName(i), err))
		case st.panics > 0:
			vs = append(vs, violate("replica_panic", "%s logged %d panic(s): %s", replicaName(i), st.panics, truncate(st.firstPanic, 200)))
		case st.notJSON > 0:
			vs = append(vs, violate("log", "%s wrote %d non-JSON lines, e.g. %q", replicaName(i), st.notJSON, truncate(st.firstNotJSON, 200)))
		}
	}
	return vs
}

// runsOf are the runs of the given tasks.
func runsOf(runs []dbRun, tasks []string) []dbRun {
	var out []dbRun
	for _, r := range runs {
		if slices.Contains(tasks, r.TaskID) {
			out = append(out, r)
		}
	}
	return out
}
