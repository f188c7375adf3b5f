// Package startstoptest is the stress test every long-running component
// runs against its lifecycle, as River's startstoptest.Stress does.
package startstoptest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/startstop"
)

// hang is how long a Start or Stop may take before the test calls it hung.
const hang = 20 * time.Second

// Stress checks the lifecycle of the services newService builds (each one
// fresh, its resources cleaned up by newService's t.Cleanup): Stop before
// Start is a no-op and Start still works after it; Start then Stop; a
// second Start is refused, also after Stop; concurrent Stops all return;
// Starts and Stops racing each other never hang or panic.
func Stress(t *testing.T, newService func(t *testing.T) startstop.Service) {
	t.Helper()
	ctx := context.Background()
	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		svc := newService(t)
		within(t, "Stop before Start", stop(svc))
		within(t, "Start after an early Stop", start(ctx, svc))
		within(t, "Stop", stop(svc))
	})
	t.Run("StartStop", func(t *testing.T) {
		t.Parallel()
		svc := newService(t)
		within(t, "Start", start(ctx, svc))
		within(t, "Stop", stop(svc))
		within(t, "a second Stop", stop(svc))
	})
	t.Run("StartTwice", func(t *testing.T) {
		t.Parallel()
		svc := newService(t)
		within(t, "Start", start(ctx, svc))
		within(t, "a second Start", refused(ctx, svc))
		within(t, "Stop", stop(svc))
		within(t, "Start after Stop", refused(ctx, svc))
	})
	t.Run("ConcurrentStops", func(t *testing.T) {
		t.Parallel()
		svc := newService(t)
		within(t, "Start", start(ctx, svc))
		within(t, "ten concurrent Stops", func() error { parallel(10, svc.Stop); return nil })
	})
	t.Run("StartRacingStop", func(t *testing.T) {
		t.Parallel()
		for range 5 {
			svc := newService(t)
			var mu sync.Mutex
			var started int
			var errs []error
			within(t, "Starts racing Stops", func() error {
				parallel(4, func() {
					err := svc.Start(ctx)
					mu.Lock()
					if err == nil {
						started++
					} else if !errors.Is(err, startstop.ErrStarted) {
						errs = append(errs, err)
					}
					mu.Unlock()
					svc.Stop()
				})
				return errors.Join(errs...)
			})
			within(t, "the last Stop", stop(svc))
			if started > 1 {
				t.Fatalf("%d Starts succeeded; only the first may", started)
			}
		}
	})
}

func start(ctx context.Context, svc startstop.Service) func() error {
	return func() error { return svc.Start(ctx) }
}

func refused(ctx context.Context, svc startstop.Service) func() error {
	return func() error {
		if err := svc.Start(ctx); !errors.Is(err, startstop.ErrStarted) {
			return fmt.Errorf("got %v, want ErrStarted", err)
		}
		return nil
	}
}

func stop(svc startstop.Service) func() error {
	return func() error { svc.Stop(); return nil }
}

// parallel runs f n times at once and returns when all have.
func parallel(n int, f func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(f)
	}
	wg.Wait()
}

// within fails the test if f fails or does not return within hang: a
// lifecycle call that blocks forever is the bug this package looks for.
func within(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(hang):
		t.Fatalf("%s did not return within %s", what, hang)
	}
}
