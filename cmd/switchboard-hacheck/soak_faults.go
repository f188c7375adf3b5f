package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// injected is one fault as it happened.
type injected struct {
	fault
	at    time.Time // when it began
	back  time.Time // when the replica or the database was given back
	ready time.Time // when every replica was ready again (zero: not within the bound)
	note  string
	err   error
}

// recoverWithin bounds the wait for every replica to be ready after a fault.
const recoverWithin = 90 * time.Second

// injector applies the plan's faults one after another, each once the
// cluster has recovered from the previous one, until the soak's end.
type injector struct {
	h    *harness
	db   *pgxpool.Pool // the soak's own connections (application_name hacheck-soak)
	plan *faultPlan

	mu   sync.Mutex
	done []injected
}

// run injects faults until until; a fault drawn too late is not injected.
func (in *injector) run(ctx context.Context, until time.Time) {
	for ctx.Err() == nil {
		f := in.plan.next()
		if time.Now().Add(f.gap).After(until) {
			return
		}
		sleepCtx(ctx, f.gap)
		if ctx.Err() != nil {
			return
		}
		in.h.progress("fault %s on %s, hold %s", f.kind, replicaName(f.replica), f.hold)
		got := in.inject(ctx, f)
		ready, err := in.h.waitAllReadiness(ctx, http.StatusOK, recoverWithin)
		if err == nil {
			got.ready = time.Now()
		} else {
			got.err = errors.Join(got.err, fmt.Errorf("not recovered %s after it: %w", ready.Round(time.Second), err))
		}
		in.mu.Lock()
		in.done = append(in.done, got)
		in.mu.Unlock()
	}
}

// inject applies one fault and gives back what it took away.
func (in *injector) inject(ctx context.Context, f fault) injected {
	got := injected{fault: f, at: time.Now()}
	switch f.kind {
	case faultKill:
		got.err = in.kill(ctx, f)
	case faultStop:
		got.err = in.stop(ctx, f)
	case faultPGRestart:
		got.err = in.restartPostgres(ctx, f)
	case faultTerminateLsn:
		got.note, got.err = in.terminate(ctx, "application_name LIKE 'switchboard-listen-%'")
	case faultTerminatePool:
		got.note, got.err = in.terminate(ctx, "application_name = '"+soakAppName(f.replica)+"'")
	case faultCut:
		got.note = in.cut(ctx, f)
	}
	got.back = time.Now()
	return got
}

func (in *injector) kill(ctx context.Context, f fault) error {
	r := in.h.cl.replicas[f.replica]
	if err := r.Kill(); err != nil {
		return err
	}
	sleepCtx(ctx, f.hold)
	return r.Start()
}

// stop is the zombie: a process that neither runs nor dies, past its
// heartbeat expiry, then goes on where it was.
func (in *injector) stop(ctx context.Context, f fault) error {
	r := in.h.cl.replicas[f.replica]
	if err := r.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	defer func() { _ = r.Signal(syscall.SIGCONT) }()
	sleepCtx(ctx, f.hold)
	return nil
}

func (in *injector) restartPostgres(ctx context.Context, f fault) error {
	if err := in.h.cl.stopPostgres(); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	sleepCtx(ctx, f.hold)
	var err error
	for range 3 { // a busy machine may be slow to free the port
		if err = in.h.cl.restartPostgres(ctx); err == nil {
			return nil
		}
		sleepCtx(ctx, time.Second)
	}
	return fmt.Errorf("start postgres again: %w", err)
}

// terminate ends the backends that match where (never the soak's own).
func (in *injector) terminate(ctx context.Context, where string) (string, error) {
	var n int
	err := in.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND `+where).Scan(&n)
	if err != nil {
		return "", fmt.Errorf("pg_terminate_backend: %w", err)
	}
	return fmt.Sprintf("%d backends", n), nil
}

func (in *injector) cut(ctx context.Context, f fault) string {
	p := in.h.cl.proxies[f.replica]
	closed := p.Closed()
	p.Cut()
	sleepCtx(ctx, f.hold)
	p.Restore()
	return fmt.Sprintf("%d connections", (p.Closed()-closed)/2)
}

// faults returns what was injected so far.
func (in *injector) faults() []injected {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]injected(nil), in.done...)
}

// dbOutages are the spans when no replica could reach PostgreSQL: from
// each restart's stop until every replica was ready again, plus one tick
// for a claim that was in flight (ticks due then may be claimed late, and
// folded into one run past the catch-up limit: docs/jobs.md).
func dbOutages(fs []injected) []window {
	var ws []window
	for _, f := range fs {
		if f.kind != faultPGRestart {
			continue
		}
		to := f.ready
		if to.IsZero() {
			to = f.back.Add(recoverWithin)
		}
		ws = append(ws, window{from: f.at.Add(-tickPeriod), to: to.Add(tickPeriod)})
	}
	return ws
}

func replicaName(i int) string {
	if i < 0 {
		return "all"
	}
	return fmt.Sprintf("r%d", i+1)
}

// soakAppName is the application_name of replica i's pool connections.
func soakAppName(i int) string { return "hacheck-" + replicaName(i) }
