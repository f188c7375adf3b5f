package startstop_test

import (
	"context"
	"testing"

	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/infra/testkit/startstoptest"
)

// ticker is the smallest service: one goroutine until Stop.
type ticker struct {
	startstop.Base
	exited chan struct{}
}

func (s *ticker) Start(ctx context.Context) error {
	runCtx, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	s.Go(func() { <-runCtx.Done(); close(s.exited) })
	return nil
}

func TestBase(t *testing.T) {
	t.Parallel()
	startstoptest.Stress(t, func(*testing.T) startstop.Service { return &ticker{exited: make(chan struct{})} })

	t.Run("StopWaitsForGoroutinesThenRunsAfter", func(t *testing.T) {
		t.Parallel()
		s := &ticker{exited: make(chan struct{})}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		ran := false
		s.StopWith(func() {
			select {
			case <-s.exited:
				ran = true
			default:
				t.Error("after ran before the goroutine exited")
			}
		})
		if !ran {
			t.Fatal("StopWith returned before running after")
		}
		select {
		case <-s.Stopping():
		default:
			t.Fatal("Stopping not closed after Stop")
		}
	})
}
