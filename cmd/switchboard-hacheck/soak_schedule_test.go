package main

import (
	"slices"
	"testing"
	"time"
)

func TestFaultPlanIsTheSeeds(t *testing.T) {
	t.Parallel()
	draw := func(seed uint64) []fault {
		p := newFaultPlan(seed, replicaCount)
		var fs []fault
		for range 60 {
			fs = append(fs, p.next())
		}
		return fs
	}
	if !slices.Equal(draw(42), draw(42)) {
		t.Fatal("one seed drew two plans")
	}
	if slices.Equal(draw(42), draw(43)) {
		t.Fatal("two seeds drew one plan")
	}
}

func TestFaultPlanDealsEveryKindInEachSix(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 50; seed++ {
		p := newFaultPlan(seed, replicaCount)
		for round := range 8 {
			var kinds []faultKind
			for range len(faultKinds) {
				f := p.next()
				kinds = append(kinds, f.kind)
				checkFault(t, seed, f)
			}
			slices.Sort(kinds)
			want := slices.Clone(faultKinds)
			slices.Sort(want)
			if !slices.Equal(kinds, want) {
				t.Fatalf("seed %d round %d dealt %v", seed, round, kinds)
			}
		}
	}
}

// checkFault checks one drawn fault against the documented ranges.
func checkFault(t *testing.T, seed uint64, f fault) {
	t.Helper()
	in := func(d, lo, hi time.Duration) bool { return d >= lo && d < hi }
	ok := in(f.gap, 3*time.Second, 9*time.Second)
	switch f.kind {
	case faultKill:
		ok = ok && in(f.hold, time.Second, 4*time.Second) && f.replica >= 0
	case faultStop:
		ok = ok && in(f.hold, heartbeatExpiry+3*time.Second, heartbeatExpiry+6*time.Second) && f.replica >= 0
	case faultPGRestart:
		ok = ok && in(f.hold, time.Second, 4*time.Second) && f.replica == -1
	case faultCut:
		ok = ok && in(f.hold, 3*time.Second, 8*time.Second) && f.replica >= 0
	case faultTerminateLsn:
		ok = ok && f.hold == 0 && f.replica == -1
	case faultTerminatePool:
		ok = ok && f.hold == 0 && f.replica >= 0
	}
	if !ok || f.replica >= replicaCount {
		t.Fatalf("seed %d drew %+v", seed, f)
	}
}

func TestFaultCounts(t *testing.T) {
	t.Parallel()
	fs := []injected{{fault: fault{kind: faultStop}}, {fault: fault{kind: faultCut}}, {fault: fault{kind: faultStop}}}
	want := "kill=0 stop=2 pg_restart=0 terminate_listen=0 terminate_pool=0 cut=1 total=3"
	if got := faultCounts(fs); got != want {
		t.Errorf("faultCounts = %q, want %q", got, want)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		i      int
		lo, hi time.Duration
	}{
		{0, 100 * time.Millisecond, 300 * time.Millisecond},
		{1, 200 * time.Millisecond, 600 * time.Millisecond},
		{4, 1600 * time.Millisecond, 4800 * time.Millisecond},
		{5, 2500 * time.Millisecond, 7500 * time.Millisecond}, // capped at 5 s
		{60, 2500 * time.Millisecond, 7500 * time.Millisecond},
	} {
		for range 200 {
			if d := backoff(tc.i, 200*time.Millisecond, 5*time.Second); d < tc.lo || d > tc.hi {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", tc.i, d, tc.lo, tc.hi)
			}
		}
	}
}
