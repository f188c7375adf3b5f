package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// maxViolationLines bounds the lines printed per kind of violation (all
// are counted).
const maxViolationLines = 20

// print writes the soak's report: the faults by kind and as a timeline, the
// workload's figures, and every violation.
func (s *soakRun) print(res soakResult) {
	fmt.Println("faults  " + faultCounts(res.faults))
	fmt.Println("timeline (from the start of the soak; ready = every replica ready again)")
	for _, f := range res.faults {
		fmt.Println("  " + s.timelineLine(f))
	}
	var w figures
	w.add("cron_tasks", len(s.crons))
	w.add("cron_ticks", res.cron.ticks)
	w.add("cron_runs", res.cron.runs)
	w.add("cron_folded", res.cron.folded)
	w.add("max_claim_lag", res.cron.maxLate)
	w.add("keys", res.keys.keys)
	w.add("keys_sent_twice", res.keys.doubled)
	w.add("keys_acked", res.keys.acked)
	w.add("keys_deferred", s.trig.deferredTicks())
	w.add("od_runs", res.keys.runs)
	fmt.Println("workload  " + w.String())
	var c figures
	c.add("calls", res.attempts.calls)
	c.add("attempts", res.attempts.attempts)
	c.add("interrupted", res.attempts.interrupted)
	c.add("in_flight_at_stop", s.inFlightAtStops(res.faults))
	c.add("none_ready", fmt.Sprintf("%dx/%s", len(res.unready), fmtDur(spanTotal(res.unready))))
	c.add("events_acked", res.events)
	c.add("events_received_unacked", res.stream.unknown)
	c.add("follower_reconnects", res.reconnects)
	c.add("drain", res.drained)
	c.add("run_jobs", jobSummary(res.jobs))
	fmt.Println("          " + c.String())
	writeViolations(os.Stdout, res.violations)
}

// faultCounts is "kill=8 stop=7 … total=45", every kind listed.
func faultCounts(fs []injected) string {
	n := map[faultKind]int{}
	for _, f := range fs {
		n[f.kind]++
	}
	var parts []string
	for _, k := range faultKinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n[k]))
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" total=%d", len(fs))
}

func (s *soakRun) timelineLine(f injected) string {
	line := fmt.Sprintf("+%-8s %-16s %-3s", offset(f.at.Sub(s.began)), f.kind, replicaName(f.replica))
	if f.hold > 0 {
		line += " hold " + fmtDur(f.back.Sub(f.at))
	}
	if f.note != "" {
		line += " " + f.note
	}
	if !f.ready.IsZero() {
		line += " ready +" + fmtDur(f.ready.Sub(f.back))
	}
	if f.err != nil {
		line += " ERROR " + oneLine(f.err)
	}
	return line
}

// offset is m:ss.s.
func offset(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	return fmt.Sprintf("%d:%04.1f", int(d.Minutes()), (d % time.Minute).Seconds())
}

// inFlightAtStops counts the target's calls that a replica had in flight
// when it was stopped: the zombies' calls, answered while they slept.
func (s *soakRun) inFlightAtStops(fs []injected) int {
	calls := s.target.snapshot()
	n := 0
	for _, f := range fs {
		if f.kind != faultStop {
			continue
		}
		for _, c := range calls {
			if c.Replica == f.replica && c.At.Before(f.at) && (c.Answered.IsZero() || c.Answered.After(f.at)) {
				n++
			}
		}
	}
	return n
}

func jobSummary(jobs map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(jobs)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, jobs[k]))
	}
	return strings.Join(parts, ",")
}

// writeViolations lists the violations by kind, at most
// maxViolationLines of each.
func writeViolations(w io.Writer, vs []violation) {
	if len(vs) == 0 {
		fmt.Fprintln(w, "violations: none")
		return
	}
	byKind := map[string][]violation{}
	for _, v := range vs {
		byKind[v.kind] = append(byKind[v.kind], v)
	}
	fmt.Fprintf(w, "violations: %d\n", len(vs))
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		fmt.Fprintf(w, "  %s (%d)\n", k, len(byKind[k]))
		for i, v := range byKind[k] {
			if i == maxViolationLines {
				fmt.Fprintf(w, "    … %d more\n", len(byKind[k])-i)
				break
			}
			fmt.Fprintln(w, "    "+v.detail)
		}
	}
}
