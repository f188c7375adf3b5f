// Package testwait is how tests wait: for a condition, with a deadline,
// never on a bare sleep.
package testwait

import (
	"testing"
	"time"
)

// For polls cond every few milliseconds until it holds, and fails the test
// if it does not within the given time.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
