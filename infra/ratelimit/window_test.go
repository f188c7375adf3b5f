package ratelimit

import (
	"testing"
	"time"
)

func TestRateWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate   Rate
		limit  int
		length time.Duration
	}{
		{Rate{5, 8}, 8, 1600 * time.Millisecond},
		{Rate{50, 100}, 100, 2 * time.Second},
		{Rate{1000, 1000}, 1000, time.Second},
		{Rate{3, 8}, 8, 2667 * time.Millisecond},
		{Rate{1e9, 1}, 1, time.Millisecond},
		{Rate{0.5, 1}, 1, 2 * time.Second},
	} {
		limit, length := tc.rate.Window()
		if limit != tc.limit || length != tc.length {
			t.Errorf("%+v: %d per %v, want %d per %v", tc.rate, limit, length, tc.limit, tc.length)
		}
	}
	if got := Retention(Rate{5, 8}, Rate{50, 100}); got != 4*time.Second+time.Minute {
		t.Errorf("retention %v", got)
	}
}

func TestSlot(t *testing.T) {
	t.Parallel()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	length := 1600 * time.Millisecond
	start := base.Truncate(length)
	for _, tc := range []struct {
		elapsed time.Duration
		weight  float64
	}{{0, 1}, {400 * time.Millisecond, 0.75}, {800 * time.Millisecond, 0.5}, {1599 * time.Millisecond, 1.0 / 1600}} {
		s := slotAt(start.Add(tc.elapsed), length)
		if !s.current.Equal(start) || !s.previous.Equal(start.Add(-length)) || abs(s.weight-tc.weight) > 1e-9 {
			t.Errorf("elapsed %v: %+v, want weight %v", tc.elapsed, s, tc.weight)
		}
		if !s.reset().Equal(start.Add(length)) {
			t.Errorf("reset %v", s.reset())
		}
	}
	// Every replica computes the same windows whatever its time zone.
	local := slotAt(start.Add(time.Second).In(time.FixedZone("x", 3600)), length)
	if !local.current.Equal(start) {
		t.Errorf("zone changed the window: %v", local.current)
	}
}

func abs(f float64) float64 { return max(f, -f) }

func TestAllows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate  float64
		n     int
		limit int
		want  bool
	}{
		{0, 1, 8, true}, {7, 1, 8, true}, {7.4, 1, 8, true}, {7.5, 1, 8, false}, {8, 1, 8, false},
		{6, 2, 8, true}, {6.6, 2, 8, false}, {0, 9, 8, false},
	} {
		if got := allows(tc.rate, tc.n, tc.limit); got != tc.want {
			t.Errorf("allows(%v, %d, %d) = %v", tc.rate, tc.n, tc.limit, got)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	length := 1600 * time.Millisecond
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Truncate(length)
	at := func(d time.Duration) slot { return slotAt(start.Add(d), length) }
	for _, tc := range []struct {
		name       string
		s          slot
		prev, curr int
		want       time.Duration
	}{
		// 8 at once: the next window must be 1/16 in (0.1 s), 1.7 s away.
		{"burst used at window start", at(0), 0, 8, 2 * time.Second},
		{"burst used late in the window", at(1500 * time.Millisecond), 0, 8, time.Second},
		// prev 8 at 0.25 in: rate 6+2=8; fits when 8(1-f)+2 < 7.5, f > 0.3125: 0.1 s.
		{"previous window fading", at(400 * time.Millisecond), 8, 2, time.Second},
		// current window full with 8 and nothing before: as the first case, later.
		{"current full mid-window", at(800 * time.Millisecond), 0, 8, time.Second},
		// prev 8, curr 8 at the start: curr must fade next window: 1.6+0.1 s.
		{"both full", at(0), 8, 8, 2 * time.Second},
	} {
		if got := tc.s.retryAfter(tc.prev, tc.curr, 1, 8); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if allows(tc.s.rate(tc.prev, tc.curr), 1, 8) {
			t.Errorf("%s: case is not limited", tc.name)
		}
	}
	// Waiting the advertised time (without traffic) makes room.
	for elapsed := time.Duration(0); elapsed < length; elapsed += 10 * time.Millisecond {
		s := at(elapsed)
		for prev := 0; prev <= 8; prev++ {
			for curr := 0; curr <= 8; curr++ {
				if allows(s.rate(prev, curr), 1, 8) {
					continue
				}
				later := slotAt(s.now.Add(s.retryAfter(prev, curr, 1, 8)), length)
				p, c := prev, curr
				if later.current.After(s.current) {
					p, c = curr, 0
					if later.current.After(s.current.Add(length)) {
						p = 0
					}
				}
				if !allows(later.rate(p, c), 1, 8) {
					t.Fatalf("elapsed %v prev %d curr %d: still limited after Retry-After", elapsed, prev, curr)
				}
			}
		}
	}
}
