// Package ratelimit owns request limits that hold for the whole cluster:
// go-chi/httprate's sliding-window algorithm with the counters in Postgres,
// and an in-process fallback so that a database that errors or is slow
// makes the limits per-replica, never off.
//
// A busy key is not one statement per request: a replica takes a share of
// the key's window in one statement (the share is counted in Postgres at
// once, so the cluster never admits more than the limit) and decides the
// next requests from it in memory. Shares start at one request, grow
// eightfold while a key spends them, and never exceed
// Options.Share of the limit (default 1/32): a share left unspent when its
// window ends expires, so with R replicas on one key the cluster admits at
// most R/32 of a window less than the limit, never more. Limits under 64
// per window are decided one request per statement, exactly.
package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	defaultTimeout       = 250 * time.Millisecond
	defaultProbeInterval = time.Second
	defaultShare         = 1.0 / 32
	probeKey             = "ratelimit:probe"
)

// Where a decision came from (the source label of the decisions metric).
const (
	SourcePostgres = "postgres" // counted in Postgres, for the whole cluster
	SourceCache    = "cache"    // refused from counts Postgres returned earlier
	SourceFallback = "fallback" // counted in this process: Postgres failed or was slow
)

// Options configure a Store; zero values mean the defaults.
type Options struct {
	DB     DB
	Logger *slog.Logger
	// Registry gets the store's metrics; nil registers nowhere.
	Registry prometheus.Registerer
	// Timeout of one decision in Postgres before the fallback decides;
	// default 250 ms.
	Timeout time.Duration
	// ProbeInterval between checks whether Postgres answers again while
	// falling back; default 1 s.
	ProbeInterval time.Duration
	// Share is the largest fraction of a limit one replica takes from
	// Postgres in one statement and spends in memory; default 1/32. A share
	// under one request (a small limit, or a negative Share) means every
	// request is decided in Postgres.
	Share float64
}

// Store decides requests against counters in Postgres and falls back to
// in-process counters while Postgres fails. It starts nothing: while falling
// back, a decision starts a probe in the background at most once per
// ProbeInterval, and the first probe that succeeds switches back.
type Store struct {
	opts    Options
	counter *Counter
	metrics *metrics

	now func() time.Time // time.Now; tests move it

	degraded  atomic.Bool
	probing   atomic.Bool
	lastProbe atomic.Int64 // unix nanoseconds
}

// NewStore returns a store on opts.DB.
func NewStore(opts Options) *Store {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Timeout = cmp.Or(opts.Timeout, defaultTimeout)
	opts.ProbeInterval = cmp.Or(opts.ProbeInterval, defaultProbeInterval)
	opts.Share = cmp.Or(opts.Share, defaultShare)
	return &Store{opts: opts, counter: NewCounter(opts.DB, opts.Timeout), metrics: newMetrics(opts.Registry), now: time.Now}
}

// FallingBack reports whether decisions are currently made per replica.
func (s *Store) FallingBack() bool { return s.degraded.Load() }

// Limiter returns a limiter of rate r; name labels its metrics and prefixes
// its keys, so limiters of one store never share counts.
func (s *Store) Limiter(name string, r Rate) *Limiter {
	limit, length := r.Window()
	share := max(int(float64(limit)*s.opts.Share), 1)
	l := &Limiter{name: name, prefix: name + ":", limit: limit, share: share, length: length, store: s, local: newLocal(length)}
	// Resolved once: a decision from a share is a few map operations, and
	// looking labels up each time would be most of its cost.
	l.allowedFromShare = s.metrics.decisions.WithLabelValues(name, "allowed", SourcePostgres)
	return l
}

// Limiter is one limit (auth per IP, API per user, ...) over any number of
// keys.
type Limiter struct {
	name, prefix string
	limit        int
	share        int // the most requests taken from Postgres at once
	length       time.Duration
	store        *Store
	local        *local

	allowedFromShare prometheus.Counter
}

// Decision is the outcome of one request, with what httprate's headers say.
type Decision struct {
	Allowed bool
	// Limit is the requests allowed per Window (X-RateLimit-Limit).
	Limit  int
	Window time.Duration
	// Remaining requests in the window after this one (X-RateLimit-Remaining).
	Remaining int
	// Reset is the end of the current window (X-RateLimit-Reset).
	Reset time.Time
	// RetryAfter, when refused, is when one more request would fit.
	RetryAfter time.Duration
	// Source is SourcePostgres, SourceCache or SourceFallback.
	Source string
}

// Window is the limiter's window length.
func (l *Limiter) Window() time.Duration { return l.length }

// Allow decides one request for key. It never fails: when Postgres cannot
// decide within the timeout the in-process fallback does.
func (l *Limiter) Allow(ctx context.Context, key string) Decision {
	key = l.prefix + key
	if l.store.degraded.Load() {
		return l.fallback(key)
	}
	if d, ok := l.spend(key, slotAt(l.store.now(), l.length)); ok {
		return d
	}
	unlock, err := l.local.lock(ctx, key)
	if err != nil {
		return l.fallback(key) // the client went away while queued
	}
	defer unlock()
	if l.store.degraded.Load() {
		return l.fallback(key)
	}
	s := slotAt(l.store.now(), l.length)
	if d, ok := l.spend(key, s); ok {
		return d // a request queued before this one took a share
	}
	prev, curr := l.local.peek(key, s)
	if !allows(s.rate(prev, curr), 1, l.limit) {
		return l.decided(s, prev, curr, false, SourceCache)
	}
	t, n, err := l.takeShare(ctx, key, s, l.limit-int(math.Round(s.rate(prev, curr))))
	if err != nil {
		l.store.failed(ctx, err)
		return l.fallback(key)
	}
	if t.ok {
		l.local.grant(key, s, t.prev, t.curr, n)
	} else {
		l.local.observe(key, s, t.prev, t.curr)
	}
	return l.decided(s, t.prev, t.curr, t.ok, SourcePostgres)
}

// spend decides a request from this replica's share of key's window.
func (l *Limiter) spend(key string, s slot) (Decision, bool) {
	prev, curr, ok := l.local.spend(key, s)
	if !ok {
		return Decision{}, false
	}
	l.allowedFromShare.Inc()
	return l.headers(s, prev, curr, true, SourcePostgres), true
}

// takeShare asks Postgres for the next share of key's window, no larger
// than what this replica last saw left of the limit. A share larger than
// what is left is refused whole, so then it asks once more for what the
// refusal says is left.
func (l *Limiter) takeShare(ctx context.Context, key string, s slot, seenLeft int) (taken, int, error) {
	n := min(l.local.shareSize(key, l.share), max(seenLeft, 1))
	t, err := l.store.take(ctx, key, s, l.limit, n)
	if err != nil || t.ok || n == 1 {
		return t, n, err
	}
	left := l.limit - int(math.Round(s.rate(t.prev, t.curr)))
	if left < 1 {
		return t, n, nil
	}
	n = min(left, n-1)
	t, err = l.store.take(ctx, key, s, l.limit, n)
	return t, n, err
}

func (l *Limiter) fallback(key string) Decision {
	if l.store.degraded.Load() {
		l.store.maybeProbe()
	}
	s := slotAt(l.store.now(), l.length)
	prev, curr, ok := l.local.take(key, s, l.limit, 1)
	l.store.metrics.fallback.WithLabelValues(l.name).Inc()
	return l.decided(s, prev, curr, ok, SourceFallback)
}

// decided builds the decision from the counts before the request, with
// httprate's arithmetic for the headers.
func (l *Limiter) decided(s slot, prev, curr int, ok bool, source string) Decision {
	outcome := "allowed"
	if !ok {
		outcome = "limited"
	}
	l.store.metrics.decisions.WithLabelValues(l.name, outcome, source).Inc()
	return l.headers(s, prev, curr, ok, source)
}

// headers is the decision without its metric.
func (l *Limiter) headers(s slot, prev, curr int, ok bool, source string) Decision {
	rate := int(s.rate(prev, curr) + 0.5)
	d := Decision{Allowed: ok, Limit: l.limit, Window: l.length, Reset: s.reset(), Source: source, Remaining: max(l.limit-rate-boolInt(ok), 0)}
	if !ok {
		d.RetryAfter = s.retryAfter(prev, curr, 1, l.limit)
	}
	return d
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// take asks Postgres within the timeout.
func (s *Store) take(ctx context.Context, key string, sl slot, limit, n int) (taken, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	start := time.Now()
	t, err := s.counter.take(ctx, key, sl, limit, n)
	s.metrics.latency.Observe(time.Since(start).Seconds())
	return t, err
}

// failed switches to the fallback after a Postgres error, unless the error
// is the request's own cancellation (a client that went away says nothing
// about the database).
func (s *Store) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	s.lastProbe.Store(time.Now().UnixNano())
	if s.degraded.CompareAndSwap(false, true) {
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("no answer within " + s.opts.Timeout.String())
		}
		s.opts.Logger.Warn("rate limits fall back to per-replica counters: Postgres failed", "error", err.Error())
		s.metrics.active.Set(1)
	}
}

// maybeProbe starts a background check of Postgres if none ran for
// ProbeInterval. Only one runs at a time, so a dead database sees one
// statement per interval per replica, not one per request.
func (s *Store) maybeProbe() {
	last := s.lastProbe.Load()
	if time.Since(time.Unix(0, last)) < s.opts.ProbeInterval || !s.probing.CompareAndSwap(false, true) {
		return
	}
	s.lastProbe.Store(time.Now().UnixNano())
	go func() {
		defer s.probing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		// The same statement as a decision: a table that is locked or a
		// database that refuses writes must keep us on the fallback.
		if _, err := s.counter.take(ctx, probeKey, slotAt(time.Now(), time.Minute), 1<<30, 1); err != nil {
			return
		}
		if s.degraded.CompareAndSwap(true, false) {
			s.opts.Logger.Info("rate limits use Postgres again: one limit for the whole cluster")
			s.metrics.active.Set(0)
		}
	}()
}

type metrics struct {
	decisions *prometheus.CounterVec
	fallback  *prometheus.CounterVec
	active    prometheus.Gauge
	latency   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_ratelimit_decisions_total",
			Help: "Rate limit decisions by limiter, outcome (allowed, limited) and source (postgres, cache, fallback).",
		}, []string{"limiter", "outcome", "source"}),
		fallback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_ratelimit_fallback_total",
			Help: "Rate limit decisions made by this replica's in-process counter because Postgres failed or was slow.",
		}, []string{"limiter"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_ratelimit_fallback_active",
			Help: "1 while rate limits are counted per replica because Postgres does not answer, else 0.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_ratelimit_postgres_duration_seconds",
			Help:    "Time to decide a request in Postgres, including waiting for a pool connection.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.decisions, m.fallback, m.active, m.latency)
	}
	return m
}
