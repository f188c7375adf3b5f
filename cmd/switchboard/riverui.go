package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"riverqueue.com/riverui"
)

// riverUIIdle is how long the River UI's background counts keep running
// after its last request.
const riverUIIdle = 10 * time.Minute

// lazyRiverUI serves the River UI and runs its background services (two
// cached job counts, refreshed every 10 and 30 s: the only statements a
// web replica would otherwise send with nobody looking) only while the
// UI is in use: the first request starts them, riverUIIdle without one
// stops them. Without them the UI counts on each request (River UI's
// stateAndCountGetEndpoint: exact for small states, an estimate for
// large ones).
//
// why: each period of use gets a new handler. A River UI handler whose
// services were told to stop says nothing when they have stopped, and
// its Start does nothing until they have: a request just after an idle
// stop would have started nothing, and the counts would have stayed off
// for another riverUIIdle.
type lazyRiverUI struct {
	build  func() (*riverui.Handler, error)
	idle   time.Duration
	logger *slog.Logger

	ui atomic.Pointer[riverui.Handler] // serves requests

	mu      sync.Mutex
	cancel  context.CancelFunc // of the running services; nil: stopped
	stale   bool               // ui's services were started once: the next period builds anew
	period  int                // counts starts; a timer stops only its own period
	lastUse time.Time
	timer   *time.Timer
	closed  bool // Stop was called: nothing starts any more
}

// newLazyRiverUI builds the first handler now, so a bad option fails the
// start of the replica.
func newLazyRiverUI(build func() (*riverui.Handler, error), logger *slog.Logger) (*lazyRiverUI, error) {
	ui, err := build()
	if err != nil {
		return nil, err
	}
	u := &lazyRiverUI{build: build, idle: riverUIIdle, logger: logger}
	u.ui.Store(ui)
	return u, nil
}

// ServeHTTP notes the use, then serves the request.
func (u *lazyRiverUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.used()
	u.ui.Load().ServeHTTP(w, r)
}

// used starts the background services, or pushes their stop later.
func (u *lazyRiverUI) used() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	u.lastUse = time.Now()
	if u.cancel != nil {
		u.timer.Reset(u.idle)
		return
	}
	cancel, err := u.start()
	if err != nil {
		u.logger.Warn("river ui background counts did not start; counting on each request", "error", err)
		return
	}
	u.cancel = cancel
	u.period++
	period := u.period
	// why: a timer that fired while used held the lock, and was Reset
	// there, fires again later: it must not stop the next period.
	u.timer = time.AfterFunc(u.idle, func() { u.idleStop(period) })
}

// start starts a period's services (u.mu held), on a new handler when the
// current one was started before.
func (u *lazyRiverUI) start() (context.CancelFunc, error) {
	if u.stale {
		ui, err := u.build()
		if err != nil {
			return nil, err
		}
		u.ui.Store(ui)
	}
	u.stale = true
	ctx, cancel := context.WithCancel(context.Background())
	if err := u.ui.Load().Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	return cancel, nil
}

// idleStop stops the services of the given period, unless used pushed
// the stop later meanwhile (the timer fired while used held the lock and
// Reset it) or a later period runs.
func (u *lazyRiverUI) idleStop(period int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if period != u.period || u.lastUse.Add(u.idle).After(time.Now()) {
		return
	}
	if u.cancel != nil {
		u.cancel()
		u.cancel = nil
	}
}

// Stop stops the background services for good.
func (u *lazyRiverUI) Stop(context.Context) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	if u.timer != nil {
		u.timer.Stop()
	}
	if u.cancel != nil {
		u.cancel()
		u.cancel = nil
	}
}
