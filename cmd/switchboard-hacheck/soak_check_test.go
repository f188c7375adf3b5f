package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var soakT0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// at is soakT0 plus secs seconds.
func at(secs float64) time.Time { return soakT0.Add(time.Duration(secs * float64(time.Second))) }

// cronRuns makes one scheduled run per tick second, claimed 0.2 s before it
// (the claim lead); fold maps a tick to its skipped_ticks, late to how
// late its claim was.
func cronRuns(ticks []float64, fold map[float64]int, late map[float64]float64) []dbRun {
	var rs []dbRun
	for _, s := range ticks {
		claimed := s - 0.2
		if l, ok := late[s]; ok {
			claimed = s + l
		}
		rs = append(rs, dbRun{ID: fmt.Sprintf("run-%v", s), Trigger: "schedule", Status: "succeeded",
			ScheduledFor: at(s), CreatedAt: at(claimed), SkippedTicks: fold[s]})
	}
	return rs
}

func seconds(from, to int, without ...int) []float64 {
	var ts []float64
	for s := from; s <= to; s++ {
		if !slices.Contains(without, s) {
			ts = append(ts, float64(s))
		}
	}
	return ts
}

// kinds lists the violations' kinds, sorted.
func kinds(vs []violation) []string {
	var ks []string
	for _, v := range vs {
		ks = append(ks, v.kind)
	}
	slices.Sort(ks)
	return ks
}

func TestCheckCronTask(t *testing.T) {
	t.Parallel()
	span := cronSpan{task: "t", created: at(0.3), stopped: at(20.5)}
	outage := []window{{from: at(8), to: at(16)}}
	for _, tc := range []struct {
		name    string
		runs    []dbRun
		outages []window
		want    []string
		ticks   int
		folded  int
	}{
		{"every tick once (19 and 20 in flight at the stop)", cronRuns(seconds(1, 18), nil, nil), nil, nil, 18, 0},
		{"a tick without a run", cronRuns(seconds(1, 18, 7), nil, nil), nil, []string{"cron_missing"}, 18, 0},
		{"a tick lost in an outage is still lost", cronRuns(seconds(1, 18, 10), nil, nil), outage, []string{"cron_missing"}, 18, 0},
		{"the first ticks missing", cronRuns(seconds(4, 18), nil, nil), nil, []string{"cron_missing"}, 17, 0},
		{"the last ticks missing", cronRuns(seconds(1, 15), nil, nil), nil, []string{"cron_missing"}, 18, 0},
		{"a second run of one tick", append(cronRuns(seconds(1, 18), nil, nil), dbRun{ID: "again", ScheduledFor: at(5.1), CreatedAt: at(5)}), nil, []string{"cron_duplicate"}, 18, 0},
		{"ticks folded in an outage", cronRuns(seconds(1, 18, 11, 12, 13), map[float64]int{10: 3}, map[float64]float64{10: 11}), outage, nil, 18, 3},
		{"ticks folded while replicas could claim", cronRuns(seconds(1, 18, 4, 5), map[float64]int{3: 2}, map[float64]float64{3: 11}), nil, []string{"cron_folded", "cron_late"}, 18, 2},
		{"folded fewer than missing", cronRuns(seconds(1, 18, 11, 12, 13), map[float64]int{10: 1}, map[float64]float64{10: 11}), outage, []string{"cron_missing"}, 18, 1},
		{"claimed 3 s late", cronRuns(seconds(1, 18), nil, map[float64]float64{6: 3}), nil, []string{"cron_late"}, 18, 0},
		{"claimed 3 s late in an outage", cronRuns(seconds(1, 18), nil, map[float64]float64{9: 3}), outage, nil, 18, 0},
		{"claimed 2 s late", cronRuns(seconds(1, 18), nil, map[float64]float64{6: 2}), nil, nil, 18, 0},
		{"claimed 6 s late while recovering from an outage", cronRuns(seconds(1, 18), nil, map[float64]float64{17: 6}), outage, nil, 18, 0},
		{"claimed 11 s late after an outage", cronRuns(seconds(1, 18), nil, map[float64]float64{17: 11}), outage, []string{"cron_late"}, 18, 0},
		{"no run at all", nil, nil, []string{"cron_missing"}, 0, 0},
	} {
		st, vs := checkCronTask(span, tc.runs, tc.outages)
		if got := kinds(vs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: violations %v, want %v (%v)", tc.name, got, tc.want, vs)
		}
		if st.ticks != tc.ticks || st.folded != tc.folded {
			t.Errorf("%s: ticks=%d folded=%d, want %d and %d", tc.name, st.ticks, st.folded, tc.ticks, tc.folded)
		}
	}
}

func TestCheckFinal(t *testing.T) {
	t.Parallel()
	runs := []dbRun{
		{ID: "a", Status: "succeeded"}, {ID: "b", Status: "queued"}, {ID: "c", Status: "failed", Error: ptr("webhook answered 503")},
		{ID: "d", Status: "running"}, {ID: "e", Status: "cancelled"},
		{ID: "f", Status: "succeeded", Error: ptr("reconciled: the run's job ended completed but its outcome was never recorded")},
	}
	want := []string{"run_cancelled", "run_not_final", "run_not_final", "run_reconciled"}
	if got := kinds(checkFinal(runs)); !slices.Equal(got, want) {
		t.Errorf("checkFinal = %v, want %v", got, want)
	}
}

func TestInWindows(t *testing.T) {
	t.Parallel()
	ws := []window{{from: at(1), to: at(2)}, {from: at(5), to: at(6)}}
	for _, tc := range []struct {
		t    float64
		want bool
	}{{0.5, false}, {1, true}, {1.5, true}, {2, true}, {3, false}, {5.5, true}, {7, false}} {
		if got := inWindows(at(tc.t), ws); got != tc.want {
			t.Errorf("inWindows(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
}

func TestDBOutages(t *testing.T) {
	t.Parallel()
	fs := []injected{
		{fault: fault{kind: faultKill}, at: at(1), back: at(3), ready: at(4)},
		{fault: fault{kind: faultPGRestart}, at: at(10), back: at(14), ready: at(17)},
		{fault: fault{kind: faultPGRestart}, at: at(30), back: at(33)}, // never ready
	}
	got := dbOutages(fs)
	want := []window{{from: at(9), to: at(18)}, {from: at(29), to: at(33).Add(recoverWithin + tickPeriod)}}
	if !slices.Equal(got, want) {
		t.Errorf("dbOutages = %v, want %v", got, want)
	}
}

func TestOffset(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0:00.0", 5900 * time.Millisecond: "0:05.9", 83*time.Second + 260*time.Millisecond: "1:23.3", 10 * time.Minute: "10:00.0",
	} {
		if got := offset(d); got != want {
			t.Errorf("offset(%s) = %s, want %s", d, got, want)
		}
	}
}

func TestWriteViolations(t *testing.T) {
	t.Parallel()
	var vs []violation
	for i := range maxViolationLines + 5 {
		vs = append(vs, violate("cron_missing", "tick %d", i))
	}
	vs = append(vs, violate("attempt_called_twice", "run r attempt 1"))
	var b strings.Builder
	writeViolations(&b, vs)
	out := b.String()
	for _, want := range []string{"violations: 26\n", "  attempt_called_twice (1)\n    run r attempt 1\n", "  cron_missing (25)\n", "    tick 19\n    … 5 more\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tick 20") {
		t.Errorf("printed more than %d of a kind:\n%s", maxViolationLines, out)
	}
	b.Reset()
	writeViolations(&b, nil)
	if b.String() != "violations: none\n" {
		t.Errorf("no violations printed %q", b.String())
	}
}
