package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// harness is one run: the cluster under test, the recording webhook target,
// the users the checks act as, and what the checks learned along the way.
type harness struct {
	opts    options
	dir     string
	cl      *cluster
	rec     *recorder
	users   map[string]*user
	cron    cronState
	started time.Time
	readyAt time.Time // when the replicas were first ready

	mu        sync.Mutex
	pgOutages []window // ticks inside these may be skipped by design

	ran, failed int
}

// window is a span of wall-clock time.
type window struct{ from, to time.Time }

// check is one line of the report.
type check struct {
	name string
	run  func(ctx context.Context) (figures, error)
}

// errSkip marks a check that cannot run in this setup (not a failure).
var errSkip = errors.New("skipped")

// checks in the order they run. The cron task runs under all of them.
func (h *harness) checks() []check {
	return []check{
		{"cluster up", h.checkClusterUp},
		{"cluster status", h.checkClusterStatus},
		{"ws ticket any replica once", h.checkTicket},
		{"run events cross-replica", h.checkRunEvents},
		{"dm cross-replica", h.checkDM},
		{"login rate limit cluster-wide", h.checkRateLimit},
		{"kill -9 replica", h.checkKill},
		{"kill -9 during cancel and backfill", h.checkKillOnDemand},
		{"presence after kill -9", h.checkPresenceKill},
		{"sigterm under load", h.checkSigterm},
		{"postgres restart", h.checkPostgresRestart},
		{"stream kill -9 + pg restart", h.checkDurableStream},
		{"primary switches", h.checkPrimarySwitch},
		{"cron exactly-once", h.checkCron},
		{"memory", h.checkMemory},
		{"logs", h.checkLogs},
	}
}

func (h *harness) selected(name string) bool {
	return h.opts.only == nil || h.opts.only.MatchString(name)
}

// newHarness builds the binary, starts PostgreSQL, the recorder and three
// replicas, registers the users and creates the every-second cron task.
func newHarness(ctx context.Context, opts options) (*harness, error) {
	dir, err := os.MkdirTemp("", "switchboard-hacheck-")
	if err != nil {
		return nil, err
	}
	// PostgreSQL may run as another account (root drops to postgres): let
	// it traverse to its data directory inside.
	_ = os.Chmod(dir, 0o755)
	h := &harness{opts: opts, dir: dir, users: map[string]*user{}, started: time.Now()}
	h.progress("temp dir %s", dir)
	if h.cl, err = startCluster(ctx, dir, clusterOptions{bouncer: opts.pgbouncer, proxies: opts.soak > 0}, h.progress); err != nil {
		return h, err
	}
	h.readyAt = time.Now()
	if h.rec, err = startRecorder(h.cl); err != nil {
		return h, err
	}
	if err := h.registerUsers(ctx); err != nil {
		return h, err
	}
	if opts.soak == 0 && h.selected("cron exactly-once") {
		h.startCron(ctx)
	}
	return h, nil
}

// runAll runs every selected check, then soaks until the profile's duration
// has passed before the final counts. It reports whether all passed.
func (h *harness) runAll(ctx context.Context) bool {
	for _, c := range h.checks() {
		if !h.selected(c.name) || (c.name == "primary switches" && !h.opts.pgbouncer) {
			continue
		}
		if c.name == "cron exactly-once" {
			h.waitCron(ctx)
		}
		if ctx.Err() != nil {
			h.report(c.name, nil, fmt.Errorf("not run: %w", ctx.Err()))
			continue
		}
		h.progress("running %s", c.name)
		began := time.Now()
		f, err := c.run(ctx)
		if h.opts.verbose {
			f.add("took", time.Since(began))
		}
		h.report(c.name, f, err)
	}
	return h.failed == 0
}

func (h *harness) report(name string, f figures, err error) {
	switch {
	case errors.Is(err, errSkip):
		fmt.Printf("SKIP %-30s %s  (%v)\n", name, f, err)
	case err != nil:
		h.ran++
		h.failed++
		fmt.Printf("FAIL %-30s %s  — %s\n", name, f, oneLine(err))
	default:
		h.ran++
		fmt.Printf("PASS %-30s %s\n", name, f)
	}
}

// waitCron waits until the cron task has run for the profile's cronFor.
func (h *harness) waitCron(ctx context.Context) {
	if h.cron.task == nil {
		return
	}
	left := time.Until(h.cron.created.Add(h.opts.profile.cronFor))
	if left <= 0 {
		return
	}
	h.progress("waiting %s more (cron task running on 3 replicas)", left.Round(time.Second))
	select {
	case <-ctx.Done():
	case <-time.After(left):
	}
}

// close stops everything; the temp dir stays when asked or when a check
// failed, and then the logs are pointed at.
func (h *harness) close(passed bool) {
	if h.rec != nil {
		h.rec.close()
	}
	if h.cl != nil {
		h.cl.stop()
	}
	if passed && !h.opts.keep {
		_ = os.RemoveAll(h.dir)
		return
	}
	if !passed && h.cl != nil {
		h.printLogTails()
	}
	fmt.Printf("kept %s\n", h.dir)
}

// printLogTails shows where each replica's log is and its last lines, so a
// CI failure can be read without the temp dir.
func (h *harness) printLogTails() {
	for _, r := range h.cl.replicas {
		fmt.Printf("--- %s log: %s (last lines)\n", r.Name(), r.LogPath())
		for _, l := range tailLines(r.LogPath(), 12) {
			fmt.Println("    " + truncate(l, 400))
		}
	}
	if h.cl.pgLog != "" {
		fmt.Printf("--- postgres log: %s\n", h.cl.pgLog)
	}
}

func (h *harness) progress(format string, args ...any) {
	if h.opts.verbose {
		fmt.Printf("  · %s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// addOutage records a span during which ticks may legitimately be skipped.
func (h *harness) addOutage(w window) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pgOutages = append(h.pgOutages, w)
}

func (h *harness) inOutage(t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.pgOutages {
		if !t.Before(w.from) && !t.After(w.to) {
			return true
		}
	}
	return false
}

// figures are a check's measurements, printed as k=v.
type figures []string

func (f *figures) add(k string, v any) {
	switch x := v.(type) {
	case time.Duration:
		v = fmtDur(x)
	case float64:
		v = fmt.Sprintf("%.1f", x)
	}
	*f = append(*f, fmt.Sprintf("%s=%v", k, v))
}

func (f figures) String() string { return strings.Join(f, " ") }

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return d.String()
	}
}

// oneLine joins a (joined) error's lines with "; ".
func oneLine(err error) string {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func tailLines(path string, n int) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
