package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
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
type lazyRiverUI struct {
	ui     *riverui.Handler
	idle   time.Duration
	logger *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc // of the running services; nil: stopped
	timer  *time.Timer
	closed bool // Stop was called: nothing starts any more
}

func newLazyRiverUI(ui *riverui.Handler, logger *slog.Logger) *lazyRiverUI {
	return &lazyRiverUI{ui: ui, idle: riverUIIdle, logger: logger}
}

// ServeHTTP notes the use, then serves the request.
func (u *lazyRiverUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.used()
	u.ui.ServeHTTP(w, r)
}

// used starts the background services, or pushes their stop later.
func (u *lazyRiverUI) used() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	if u.cancel != nil {
		u.timer.Reset(u.idle)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := u.ui.Start(ctx); err != nil {
		cancel()
		u.logger.Warn("river ui background counts did not start; counting on each request", "error", err)
		return
	}
	u.cancel = cancel
	u.timer = time.AfterFunc(u.idle, u.idleStop)
}

func (u *lazyRiverUI) idleStop() {
	u.mu.Lock()
	defer u.mu.Unlock()
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
