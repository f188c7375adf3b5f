// Command switchboard-hacheck proves Switchboard's multi-replica promises
// with real processes: it builds the switchboard binary, starts PostgreSQL
// (infra/pgembed) and three replicas on loopback ports, and runs the design's
// validation checklist as a black-box client of docs/api.md — cron exactly-once,
// cross-replica realtime, tickets, the cluster-wide rate limit, kill -9,
// presence leaves after kill -9,
// SIGTERM under load, a PostgreSQL restart, a durable stream followed by the
// clients/js client (Node) across kill -9 and a PostgreSQL restart, and
// memory. One line per check
// with its figures; the exit status is non-zero when any check fails.
//
//	go run ./cmd/switchboard-hacheck                 # default profile (< 5 min)
//	go run ./cmd/switchboard-hacheck -profile ci     # shorter, for CI
//	go run ./cmd/switchboard-hacheck -duration 10m   # the cron task runs longer
//	go run ./cmd/switchboard-hacheck -pgbouncer      # through PgBouncer, primary switch included
//	go run ./cmd/switchboard-hacheck -soak 10m       # random-fault soak (-seed N reproduces its faults)
//
// -soak runs, instead of the checks, a mixed workload on the three replicas
// while a fault injector (seeded) kills, stops, cuts and restarts things,
// then checks the invariants from the database and its recorders (soak.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"
)

// profile sets how long each phase lasts.
type profile struct {
	name string
	// cronFor is the least time the cron task runs, chaos included.
	cronFor time.Duration
	// pgDown is how long PostgreSQL stays stopped.
	pgDown time.Duration
	// load is how long the API load runs around a SIGTERM.
	load time.Duration
	// hammer is how long the concurrent login hammer lasts.
	hammer time.Duration
	// rescue bounds the wait for a killed replica's job to finish elsewhere.
	rescue time.Duration
}

var profiles = map[string]profile{
	"default": {name: "default", cronFor: 2 * time.Minute, pgDown: 4 * time.Second, load: 4 * time.Second, hammer: 3 * time.Second, rescue: 75 * time.Second},
	"ci":      {name: "ci", cronFor: 60 * time.Second, pgDown: 3 * time.Second, load: 3 * time.Second, hammer: 2 * time.Second, rescue: 75 * time.Second},
}

type options struct {
	profile profile
	keep    bool
	// pgbouncer runs the replicas through a real PgBouncer in transaction
	// mode and adds the "primary switches" check.
	pgbouncer bool
	only      *regexp.Regexp
	verbose   bool
	// soak, when set, runs the random-fault soak for this long instead of
	// the checks; seed draws its faults.
	soak time.Duration
	seed uint64
}

func main() {
	os.Exit(realMain())
}

func realMain() int {
	opts, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "switchboard-hacheck:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A hard ceiling so a hung check cannot hold CI forever.
	ceiling := opts.profile.cronFor + 8*time.Minute
	if opts.soak > 0 {
		ceiling = opts.soak + drainWithin + 2*recoverWithin + 5*time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, ceiling)
	defer cancel()

	start := time.Now()
	h, err := newHarness(ctx, opts)
	if err != nil {
		fmt.Printf("FAIL setup  %v\n", err)
		if h != nil {
			h.close(false)
		}
		return 1
	}
	var ok bool
	if opts.soak > 0 {
		ok = h.runSoak(ctx)
	} else {
		ok = h.runAll(ctx)
	}
	h.close(ok)
	verdict := "PASS"
	if !ok {
		verdict = "FAIL"
	}
	if opts.soak > 0 {
		fmt.Printf("%s switchboard-hacheck -soak %s -seed %d  elapsed=%s\n", verdict, opts.soak, opts.seed, time.Since(start).Round(time.Second))
	} else {
		fmt.Printf("%s switchboard-hacheck  profile=%s pgbouncer=%v checks=%d failed=%d elapsed=%s\n",
			verdict, opts.profile.name, opts.pgbouncer, h.ran, h.failed, time.Since(start).Round(time.Second))
	}
	if !ok {
		return 1
	}
	return 0
}

func parseFlags() (options, error) {
	var (
		o        options
		name     string
		duration time.Duration
		only     string
	)
	flag.StringVar(&name, "profile", "default", "default, or ci (shorter)")
	flag.DurationVar(&duration, "duration", 0, "how long the every-second cron task runs under the checks, chaos included (default: the profile's)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir (binary, logs, database) after a passing run; a failing run always keeps it")
	flag.StringVar(&only, "run", "", "run only the checks whose name matches this regexp (setup always runs)")
	flag.BoolVar(&o.verbose, "v", false, "print progress while checks run")
	flag.BoolVar(&o.pgbouncer, "pgbouncer", false, "run the replicas through a real PgBouncer (transaction mode; LISTEN on a session-mode alias) and add the primary-switch check")
	flag.DurationVar(&o.soak, "soak", 0, "run the random-fault soak for this long instead of the checks (e.g. 10m)")
	flag.Uint64Var(&o.seed, "seed", 0, "the soak's seed: the same seed injects the same faults in the same order (default: drawn, and printed)")
	flag.Parse()
	if o.soak > 0 && o.pgbouncer {
		return o, errors.New("-soak runs on PostgreSQL directly: drop -pgbouncer")
	}
	if o.seed == 0 {
		o.seed = rand.Uint64N(1e6) + 1 // short enough to type back
	}
	p, ok := profiles[name]
	if !ok {
		return o, fmt.Errorf("unknown -profile %q (default or ci)", name)
	}
	if duration > 0 {
		p.cronFor = duration
	}
	o.profile = p
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return o, fmt.Errorf("-run: %w", err)
		}
		o.only = re
	}
	return o, nil
}
