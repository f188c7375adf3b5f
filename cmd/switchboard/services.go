package main

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/infra/startstop"
)

// service is one long-running part of a replica as the ordered list runs
// it. stop's ctx carries the shutdown deadline.
type service struct {
	name  string
	start func(ctx context.Context) error
	stop  func(ctx context.Context)
}

// component adapts a startstop.Service (its Stop bounds itself).
func component(name string, s startstop.Service) service {
	return service{name: name, start: s.Start, stop: func(context.Context) { s.Stop() }}
}

// onStop is a step that only has a stop half (drain, close the sockets).
func onStop(name string, stop func(ctx context.Context)) service {
	return service{name: name, start: func(context.Context) error { return nil }, stop: stop}
}

// startWithin bounds s's start by d.
func startWithin(d time.Duration, s service) service {
	start := s.start
	s.start = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return start(ctx)
	}
	return s
}

// services start in list order and stop in reverse, like River's
// StartAll: when one fails to start, the ones before it are stopped.
type services struct {
	list    []service
	started int
}

// startAll starts every service in order; on a failure it stops the
// started ones (within stopBudget) and returns the error.
func (s *services) startAll(ctx context.Context, stopBudget time.Duration) error {
	for _, svc := range s.list[s.started:] {
		if err := svc.start(ctx); err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), stopBudget)
			defer cancel()
			s.stopAll(sctx)
			return fmt.Errorf("start %s: %w", svc.name, err)
		}
		s.started++
	}
	return nil
}

// stopAll stops the started services, last first.
func (s *services) stopAll(ctx context.Context) {
	for ; s.started > 0; s.started-- {
		s.list[s.started-1].stop(ctx)
	}
}
