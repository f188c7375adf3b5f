package ratelimit

import (
	"math"
	"time"
)

// Rate is a limit as operators configure it: PerSecond sustained, Burst at
// once.
type Rate struct {
	PerSecond float64
	Burst     int
}

// Window maps a Rate onto httprate's sliding window: Burst requests per
// window of Burst/PerSecond seconds (rounded to the millisecond). A client
// with no recent requests gets exactly Burst at once (the previous window is
// empty), and one sending steadily gets Burst per window, which is PerSecond.
// With the API's 5/s burst 8: 8 per 1.6 s, so the ninth quick request is
// refused and a patient client sustains 5/s.
func (r Rate) Window() (limit int, length time.Duration) {
	length = time.Duration(float64(r.Burst) / r.PerSecond * float64(time.Second)).Round(time.Millisecond)
	return r.Burst, max(length, time.Millisecond)
}

// Retention is how long counters must be kept for limiters of these rates:
// two windows of the longest (the current and the previous one are read),
// plus a minute for clocks of replicas that disagree.
func Retention(rates ...Rate) time.Duration {
	var longest time.Duration
	for _, r := range rates {
		_, l := r.Window()
		longest = max(longest, l)
	}
	return 2*longest + time.Minute
}

// slot is where an instant falls in httprate's sliding window: windows are
// aligned on multiples of their length since Go's zero time, the same on
// every replica, and the previous window counts for the part of it still
// inside the last window length (weight = 1 - elapsed fraction of the
// current one).
type slot struct {
	now, current, previous time.Time
	length                 time.Duration
	weight                 float64
}

func slotAt(now time.Time, length time.Duration) slot {
	now = now.UTC()
	cur := now.Truncate(length)
	return slot{
		now: now, current: cur, previous: cur.Add(-length), length: length,
		weight: float64(length-now.Sub(cur)) / float64(length),
	}
}

// rate is httprate's estimate of the requests in the last window length.
func (s slot) rate(prev, curr int) float64 {
	return float64(prev)*s.weight + float64(curr)
}

// allows is httprate's test: n more requests fit when the rounded rate plus
// n stays within the limit.
func allows(rate float64, n, limit int) bool {
	return int(math.Round(rate))+n <= limit
}

// reset is httprate's X-RateLimit-Reset: the end of the current window.
func (s slot) reset() time.Time { return s.current.Add(s.length) }

// retryAfter is how long until n more requests would fit if nobody sent any
// meanwhile: later in this window as the previous one weighs less, or in the
// next one, where this window becomes the previous. Retry-After counts whole
// seconds, so it is rounded up and at least 1 s.
func (s slot) retryAfter(prev, curr, n, limit int) time.Duration {
	// round(rate)+n <= limit  <=>  rate < limit-n+0.5
	budget := float64(limit-n) + 0.5
	var at time.Time
	switch {
	case budget <= 0:
		at = s.reset().Add(s.length)
	case float64(curr) < budget && prev > 0:
		// prev*(1-f) + curr < budget  <=>  f > 1 - (budget-curr)/prev
		at = s.current.Add(time.Duration((1 - (budget-float64(curr))/float64(prev)) * float64(s.length)))
	case float64(curr) < budget:
		at = s.now
	default:
		// next window: curr*(1-f) < budget  <=>  f > 1 - budget/curr
		at = s.reset().Add(time.Duration((1 - budget/float64(curr)) * float64(s.length)))
	}
	wait := at.Sub(s.now)
	secs := math.Ceil(wait.Seconds() + 1e-3) // strictly after the boundary
	return time.Duration(max(secs, 1)) * time.Second
}
