package realtime

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/startstoptest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

func TestBusStartStop(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	pool, err := db.Connect(context.Background(), dbURL, db.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	t.Run("WithHub", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(*testing.T) startstop.Service {
			return New(Options{Bus: BusOptions{Pool: pool}, Hub: &HubOptions{}}).Bus
		})
	})
	t.Run("WithoutHub", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(*testing.T) startstop.Service { return NewBus(BusOptions{Pool: pool}) })
	})
}

// TestBusStopWithAHungDatabase: a database that accepts and then stops
// answering (not one that refuses) must not hold Stop past StopTimeout;
// what could not be sent is dropped and counted.
func TestBusStopWithAHungDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	proxy := newFreezingProxy(t, dbtest.NewDatabaseURL(t))
	pool, err := db.Connect(ctx, proxy.url, db.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	bus := NewBus(BusOptions{Pool: pool, MaxBatch: 1, StopTimeout: 300 * time.Millisecond})
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bus.PublishUser(ctx, uuid.NewString(), "before", nil); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "a message through the proxy", func() bool { return counterValue(bus.metrics.published) == 1 })
	proxy.freeze()
	for range 5 {
		if err := bus.PublishUser(ctx, uuid.NewString(), "stuck", nil); err != nil {
			t.Fatal(err)
		}
	}
	stopped := make(chan struct{})
	go func() { bus.Stop(); close(stopped) }()
	// Without the deadline each stuck message costs two 5 s attempts.
	select {
	case <-stopped:
	case <-time.After(8 * time.Second):
		t.Fatal("Stop is held by the hung database past its StopTimeout")
	}
	if got := counterValue(bus.metrics.dropped); got != 5 {
		t.Fatalf("dropped %v messages, want the 5 stuck ones", got)
	}
}

// TestBusFlushIsolatesARefusedMessage: one message the database refuses
// (here a NOTIFY payload over its limit) is dropped alone; the others of
// its batch are delivered.
func TestBusFlushIsolatesARefusedMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	receiver := startNode(t, dbURL, HubOptions{})
	user := uuid.NewString()
	c := dial(t, receiver, user)
	pool, err := db.Connect(ctx, dbURL, db.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	sender := NewBus(BusOptions{Pool: pool})
	// Queued before Start, so that the publisher takes all four in one batch.
	for i, name := range []string{"first", "poison", "second", "third"} {
		if name == "poison" {
			sender.queue <- outgoing{payload: strings.Repeat("x", maxNotifyBytes+1)}
			continue
		}
		if err := sender.PublishUser(ctx, user, name, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := sender.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.Stop)
	for _, want := range []string{"first", "second", "third"} {
		c.expect(t, want)
	}
	testwait.For(t, 10*time.Second, "the counters", func() bool {
		return counterValue(sender.metrics.published) == 3 && counterValue(sender.metrics.dropped) == 1
	})
}

// freezingProxy forwards TCP to Postgres until freeze; then it holds every
// byte, on old and new connections, as a hung server or network would.
type freezingProxy struct {
	url    string
	frozen chan struct{}
	once   sync.Once
}

func newFreezingProxy(t *testing.T, dbURL string) *freezingProxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{frozen: make(chan struct{})}
	done := make(chan struct{})
	var conns sync.WaitGroup
	t.Cleanup(func() { close(done); l.Close(); conns.Wait() })
	target := u.Host
	u.Host = l.Addr().String()
	p.url = u.String()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { p.serve(c, target, done) })
		}
	}()
	return p
}

func (p *freezingProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

func (p *freezingProxy) serve(c net.Conn, target string, done chan struct{}) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { <-done; c.Close(); up.Close() }()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(up, c, done) })
	wg.Go(func() { p.pipe(c, up, done) })
	wg.Wait()
}

// pipe copies src to dst until frozen; then it reads nothing more.
func (p *freezingProxy) pipe(dst io.WriteCloser, src io.Reader, done chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-p.frozen:
			<-done
			return
		default:
		}
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		select {
		case <-p.frozen:
			<-done
			return
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// TestBusFailedStartLeavesNothingRunning: a Start whose LISTEN connection
// is not up before ctx ends stops the publisher and the listener again.
func TestBusFailedStartLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	pool, err := db.Connect(context.Background(), dbtest.NewDatabaseURL(t), db.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	nowhere := pool.Config().ConnConfig.Copy()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere.Host, nowhere.Port = "127.0.0.1", uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close() // nothing listens there any more: every LISTEN attempt fails
	bus := New(Options{Bus: BusOptions{Pool: pool, ListenConfig: nowhere}, Hub: &HubOptions{}}).Bus
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := bus.Start(ctx); err == nil {
		t.Fatal("Start succeeded without a LISTEN connection")
	}
	if err := bus.PublishUser(context.Background(), uuid.NewString(), "x", nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("publish after a failed Start = %v, want ErrStopped: the bus still runs", err)
	}
}
