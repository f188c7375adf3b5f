package main

import (
	"slices"
	"testing"
	"time"
)

func TestReadinessSpans(t *testing.T) {
	t.Parallel()
	var w readiness
	for _, round := range []struct {
		at    float64
		ready bool
	}{{0, true}, {0.5, false}, {1, false}, {1.5, true}, {2, true}, {2.5, false}, {3, true}, {3.5, false}} {
		w.note(round.ready, at(round.at))
	}
	w.note(true, at(4)) // the watch stops with a span open
	want := []window{{from: at(0.5), to: at(1.5)}, {from: at(2.5), to: at(3)}, {from: at(3.5), to: at(4)}}
	if got := w.unready(); !slices.Equal(got, want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
	if d := spanTotal(want); d != 2*time.Second {
		t.Errorf("spanTotal = %s, want 2s", d)
	}
	widened := noneReady(want[:1])
	if !slices.Equal(widened, []window{{from: at(0.5).Add(-tickPeriod - readyEvery), to: at(1.5).Add(tickPeriod)}}) {
		t.Errorf("noneReady = %v", widened)
	}
}
