package web

import (
	"testing"
	"time"
)

// TestReadyLogIsNotEveryProbe: a failing readiness is logged when its
// reason changes and once a minute while it lasts, not at every probe and
// scrape.
func TestReadyLogIsNotEveryProbe(t *testing.T) {
	t.Parallel()
	var l readyLog
	at := time.Unix(1_000_000, 0)
	steps := []struct {
		reason string
		after  time.Duration
		logged bool
	}{
		{"postgres: the database is unreachable", 0, true},
		{"postgres: the database is unreachable", time.Second, false},
		{"postgres: the database is unreachable", 30 * time.Second, false},
		{"postgres: no answer within 2 s", time.Second, true},
		{"postgres: no answer within 2 s", time.Minute, true},
		{"", time.Second, false},
		{"postgres: no answer within 2 s", time.Second, true},
	}
	for i, s := range steps {
		at = at.Add(s.after)
		if got := l.due(s.reason, at); got != s.logged {
			t.Fatalf("step %d (%q after %s): logged %v, want %v", i, s.reason, s.after, got, s.logged)
		}
	}
}
