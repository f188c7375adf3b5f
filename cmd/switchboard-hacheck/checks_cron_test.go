package main

import (
	"testing"
	"time"
)

func TestAnalyzeTicks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(secs ...float64) []time.Time {
		var ts []time.Time
		for _, s := range secs {
			ts = append(ts, t0.Add(time.Duration(s*float64(time.Second))))
		}
		return ts
	}
	never := func(time.Time) bool { return false }
	outage := func(t time.Time) bool { return t.After(t0.Add(3*time.Second)) && t.Before(t0.Add(6*time.Second)) }
	for _, tc := range []struct {
		name                         string
		ts                           []time.Time
		excused                      func(time.Time) bool
		ticks, dup, missing, skipped int
	}{
		{"every tick once", at(0, 1, 2, 3, 4), never, 5, 0, 0, 0},
		{"unsorted", at(3, 0, 2, 1), never, 4, 0, 0, 0},
		{"a second run of one tick", at(0, 1, 1.2, 2), never, 3, 1, 0, 0},
		{"a hole", at(0, 1, 4, 5), never, 6, 0, 2, 0},
		{"a hole inside an outage", at(0, 1, 2, 3, 7, 8), outage, 9, 0, 1, 2},
		{"late but not missed", at(0, 1.4, 2, 3), never, 4, 0, 0, 0},
	} {
		a := analyzeTicks(tc.ts, time.Second, tc.excused)
		if a.ticks != tc.ticks || a.dup != tc.dup || a.missing != tc.missing || a.excused != tc.skipped {
			t.Errorf("%s: ticks=%d dup=%d missing=%d excused=%d, want %d %d %d %d (%v)",
				tc.name, a.ticks, a.dup, a.missing, a.excused, tc.ticks, tc.dup, tc.missing, tc.skipped, a.examples)
		}
	}
}

func TestHexPort(t *testing.T) {
	t.Parallel()
	if p := hexPort("0100007F:1F90"); p != 8080 {
		t.Errorf("hexPort = %d, want 8080", p)
	}
	if p := hexPort("00000000000000000000000001000000:0050"); p != 80 {
		t.Errorf("hexPort v6 = %d, want 80", p)
	}
}
