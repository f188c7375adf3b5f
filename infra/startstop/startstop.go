// Package startstop owns the lifecycle every long-running component shares,
// in the spirit of River's startstop.BaseStartStop: a component runs once,
// a second Start is refused, Stop before Start is a no-op, concurrent Stops
// are safe and each blocks until the component's goroutines have exited.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted is a second Start of a component (running or stopped): a
// component runs once; build a new one to run again.
var ErrStarted = errors.New("already started")

// Service is what the stress test and cmd's ordered list drive.
type Service interface {
	// Start returns once the service runs; ctx bounds starting, not running.
	Start(ctx context.Context) error
	// Stop blocks until the service has exited.
	Stop()
}

// Base is embedded (or held) by a component. The component's Start calls
// Begin, launches its goroutines with Go, and its Stop calls Stop (after
// or around its own shutdown steps, see StopWith).
type Base struct {
	mu       sync.Mutex
	started  bool
	stopped  bool // Stop began: Go launches nothing more
	cancel   context.CancelFunc
	stopping chan struct{} // closed when Stop begins
	wg       sync.WaitGroup
	stopOnce sync.Once
	done     chan struct{} // closed when Stop has finished
}

func (b *Base) init() {
	if b.stopping == nil {
		b.stopping, b.done = make(chan struct{}), make(chan struct{})
	}
}

// Begin marks the component started and returns the context its
// goroutines run under: detached from ctx's cancellation (ctx only bounds
// starting), cancelled when Stop begins. A second call returns ErrStarted.
func (b *Base) Begin(ctx context.Context) (context.Context, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	if b.started {
		return nil, ErrStarted
	}
	b.started = true
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.cancel = cancel
	return runCtx, nil
}

// Go runs f in a goroutine that Stop waits for. Call it from Start, after
// Begin. Once Stop has begun it launches nothing: a Start racing a Stop
// must not wait for such a goroutine without also watching its run context.
func (b *Base) Go(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.wg.Go(f)
}

// Stopping is closed when Stop begins: goroutines that must finish work
// (flush a queue) watch it instead of their context.
func (b *Base) Stopping() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.stopping
}

// Started reports whether Begin was called.
func (b *Base) Started() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.started
}

// Stop is StopWith(nil).
func (b *Base) Stop() { b.StopWith(nil) }

// StopWith stops the component: it closes Stopping, cancels the run
// context, waits for every goroutine started with Go, then runs after
// (deregister, close a connection). Before Begin it does nothing and a
// later Start still works. Concurrent and repeated calls are safe: the
// first does the work, the others block until it is done.
func (b *Base) StopWith(after func()) {
	b.mu.Lock()
	b.init()
	started, cancel := b.started, b.cancel
	b.stopped = b.stopped || started
	b.mu.Unlock()
	if !started {
		return
	}
	b.stopOnce.Do(func() {
		close(b.stopping)
		cancel()
		b.wg.Wait()
		if after != nil {
			after()
		}
		close(b.done)
	})
	<-b.done
}
