package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/switchboard/switchboard/infra/freeport"
	"github.com/switchboard/switchboard/infra/pgembed"
)

// checkPrimarySwitch moves the database to a new server behind the same
// address while the cron task ticks: a streaming standby made with
// pg_basebackup, then the old primary stops (fast shutdown: its WAL reaches
// the standby first), the standby is promoted and PgBouncer is repointed
// at it with a reload. Every replica's readiness goes 503 and back, no
// process dies, LISTEN reconnects (a cross-replica event arrives),
// ticks resume, and none is lost or doubled beyond the outage the catch-up
// rules fold.
func (h *harness) checkPrimarySwitch(ctx context.Context) (figures, error) {
	var f figures
	if h.cl.bouncer == nil || h.cl.pg == nil {
		return f, fmt.Errorf("needs -pgbouncer and our own PostgreSQL: %w", errSkip)
	}
	port, err := freeport.Port()
	if err != nil {
		return f, err
	}
	opts := pgembed.Options{Dir: filepath.Join(h.cl.dir, "pg-standby"), Ephemeral: true, Port: port, MaxConnections: 300}
	began := time.Now()
	standby, err := pgembed.StartStandby(ctx, h.cl.pg, opts)
	if err != nil {
		return f, fmt.Errorf("start the standby: %w", err)
	}
	f.add("standby_ready", time.Since(began))
	var errs []error
	down := time.Now()
	if err := h.cl.stopPostgres(); err != nil {
		_ = standby.Stop()
		return f, fmt.Errorf("stop the old primary: %w", err)
	}
	unready, err := h.waitAllReadiness(ctx, http.StatusServiceUnavailable, 10*time.Second)
	f.add("ready_503_after", unready)
	if err != nil {
		errs = append(errs, err)
	}
	if err := standby.Promote(ctx); err != nil {
		_ = standby.Stop()
		return f, errors.Join(append(errs, err)...)
	}
	if err := h.cl.bouncer.Repoint(standby.Addr()); err != nil {
		return f, errors.Join(append(errs, fmt.Errorf("repoint pgbouncer: %w", err))...)
	}
	h.cl.pg, h.cl.pgOpts, h.cl.pgURL = standby, opts, standby.URL()
	h.cl.pgLog = filepath.Join(opts.Dir, "postgres.log")
	up := time.Now()
	f.add("switch", up.Sub(down))
	ready, err := h.waitAllReadiness(ctx, http.StatusOK, 30*time.Second)
	f.add("ready_after", ready)
	h.addOutage(window{from: down.Add(-tickPeriod), to: up.Add(ready + 2*time.Second)})
	if err != nil {
		return f, errors.Join(append(errs, err)...)
	}
	errs = append(errs, h.afterOutage(ctx, &f, outage{down: down, up: up, ready: ready,
		during: "during the switch", after: "after the switch", skipped: "skipped_switch"})...)
	return f, errors.Join(errs...)
}
