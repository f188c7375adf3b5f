package realtime

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FrameLimits bound what clients send, so that one user cannot flood the
// bus, the database or another user's socket. Frames are counted in token
// buckets per connection and per user on this node (the user's buckets are
// shared by all of its sockets here and outlive them until refilled, so
// reconnecting does not reset them). Zero values mean the defaults.
type FrameLimits struct {
	ConnRate  float64 // frames per second per connection; default 20
	ConnBurst int     // default 40
	UserRate  float64 // frames per second per user on this node; default 40
	UserBurst int     // default 80
	// UserBytes per second per user on this node; default 256 KiB. The
	// burst is 4 s worth, and never less than one MaxFrameBytes frame.
	UserBytes int
	// Strikes: refused frames in a row after which the connection is
	// closed with CloseRateLimited; default 20.
	Strikes int
	// MaxConnsPerUser open on this node; more are refused with
	// ErrTooManyConnections before the upgrade. Default 20.
	MaxConnsPerUser int
}

// CloseRateLimited closes a connection that kept sending frames over its
// limits after being told (error events with code "rate_limited").
const CloseRateLimited = 4029

// ErrTooManyConnections: the user holds MaxConnsPerUser sockets here.
var ErrTooManyConnections = errors.New("too many WebSocket connections for this user; close one first")

func (l FrameLimits) withDefaults() FrameLimits {
	l.ConnRate = cmp.Or(l.ConnRate, 20)
	l.ConnBurst = cmp.Or(l.ConnBurst, 40)
	l.UserRate = cmp.Or(l.UserRate, 40)
	l.UserBurst = cmp.Or(l.UserBurst, 80)
	l.UserBytes = cmp.Or(l.UserBytes, 256<<10)
	l.Strikes = cmp.Or(l.Strikes, 20)
	l.MaxConnsPerUser = cmp.Or(l.MaxConnsPerUser, 20)
	return l
}

// bucket is a token bucket; the caller synchronises.
type bucket struct {
	tokens, rate, burst float64
	last                time.Time
}

func newBucket(rate, burst float64, now time.Time) bucket {
	return bucket{tokens: burst, rate: rate, burst: burst, last: now}
}

func (b *bucket) refill(now time.Time) {
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}

// take removes n tokens if there are that many.
func (b *bucket) take(n float64, now time.Time) bool {
	b.refill(now)
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// wait is how long until n tokens are there.
func (b *bucket) wait(n float64) time.Duration {
	if b.tokens >= n {
		return 0
	}
	return time.Duration((n - b.tokens) / b.rate * float64(time.Second))
}

// full reports whether the bucket has refilled completely.
func (b *bucket) full(now time.Time) bool {
	b.refill(now)
	return b.tokens >= b.burst
}

// connLimit is one connection's bucket and its refused frames in a row.
type connLimit struct {
	mu      sync.Mutex
	frames  bucket
	strikes int
}

type userLimit struct {
	frames, bytes bucket
	conns         int
}

// limiter holds the per-user buckets of this node.
type limiter struct {
	opts      FrameLimits
	byteBurst float64
	metrics   limitMetrics

	mu     sync.Mutex
	users  map[string]*userLimit
	forgot time.Time
}

func newLimiter(opts FrameLimits, maxFrame int64, reg prometheus.Registerer) *limiter {
	opts = opts.withDefaults()
	return &limiter{
		opts: opts, byteBurst: max(4*float64(opts.UserBytes), float64(maxFrame)),
		metrics: newLimitMetrics(reg), users: map[string]*userLimit{},
	}
}

// addConn counts a new connection of user, or refuses it.
func (l *limiter) addConn(user string) (*connLimit, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetRefilled(now)
	u := l.users[user]
	if u == nil {
		u = &userLimit{
			frames: newBucket(l.opts.UserRate, float64(l.opts.UserBurst), now),
			bytes:  newBucket(float64(l.opts.UserBytes), l.byteBurst, now),
		}
		l.users[user] = u
	}
	if u.conns >= l.opts.MaxConnsPerUser {
		l.metrics.connsRefused.Inc()
		return nil, fmt.Errorf("%w (at most %d per user on a node)", ErrTooManyConnections, l.opts.MaxConnsPerUser)
	}
	u.conns++
	return &connLimit{frames: newBucket(l.opts.ConnRate, float64(l.opts.ConnBurst), now)}, nil
}

func (l *limiter) removeConn(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.users[user]; u != nil {
		u.conns--
	}
}

// forgetRefilled forgets, every 10 s, users with no connection whose
// buckets have refilled: forgetting them earlier would hand a reconnecting
// flooder a fresh burst. The caller holds l.mu.
func (l *limiter) forgetRefilled(now time.Time) {
	if now.Sub(l.forgot) < 10*time.Second {
		return
	}
	l.forgot = now
	for user, u := range l.users {
		if u.conns <= 0 && u.frames.full(now) && u.bytes.full(now) {
			delete(l.users, user)
		}
	}
}

// verdict is the answer to one frame.
type verdict struct {
	ok         bool
	first      bool          // the first refused frame of a streak: say so
	close      bool          // too many refused frames in a row
	retryAfter time.Duration // when refused: until the limit that refused has room
	what       string        // which limit refused
}

// allow takes one frame of size bytes from c's buckets and its user's.
func (l *limiter) allow(c *connLimit, user string, size int) verdict {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	v := l.check(c, user, float64(size), now)
	if v.ok {
		c.strikes = 0
		return v
	}
	c.strikes++
	v.first = c.strikes == 1
	v.close = c.strikes >= l.opts.Strikes
	l.metrics.limited.WithLabelValues(v.what).Inc()
	return v
}

func (l *limiter) check(c *connLimit, user string, size float64, now time.Time) verdict {
	if !c.frames.take(1, now) {
		return verdict{retryAfter: c.frames.wait(1), what: "connection"}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.users[user]
	if u == nil { // not counted (addConn): nothing to charge
		return verdict{ok: true}
	}
	if !u.frames.take(1, now) {
		return verdict{retryAfter: u.frames.wait(1), what: "user"}
	}
	if !u.bytes.take(min(size, l.byteBurst), now) {
		return verdict{retryAfter: u.bytes.wait(min(size, l.byteBurst)), what: "user_bytes"}
	}
	return verdict{ok: true}
}

type limitMetrics struct {
	limited      *prometheus.CounterVec
	connsRefused prometheus.Counter
	limitCloses  prometheus.Counter
}

func newLimitMetrics(reg prometheus.Registerer) limitMetrics {
	m := limitMetrics{
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_ws_frames_limited_total",
			Help: "Client frames refused by a rate limit, by the limit that refused them (connection, user, user_bytes).",
		}, []string{"limit"}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_ws_connections_refused_total", Help: "WebSocket upgrades refused because the user held SWITCHBOARD_WS_MAX_CONNS_PER_USER sockets on this node."}),
		limitCloses:  prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_ws_rate_limit_closes_total", Help: "WebSocket connections closed with 4029 for sending over their limits."}),
	}
	for _, what := range []string{"connection", "user", "user_bytes"} {
		m.limited.WithLabelValues(what)
	}
	register(reg, m.limited, m.connsRefused, m.limitCloses)
	return m
}

// admitFrame applies the limits to a frame from c. The first refused frame
// of a streak is answered with an error event (code "rate_limited",
// retry_after_ms); the next are dropped without an answer (answering each
// would let a flooder fill its own send buffer), and after Strikes of them
// in a row the connection is closed with 4029.
func (h *Hub) admitFrame(c *client, size int) bool {
	v := h.limits.allow(c.limit, c.user, size)
	if v.ok {
		return true
	}
	if v.close {
		if c.closing.CompareAndSwap(false, true) {
			h.limits.metrics.limitCloses.Inc()
			h.logger.Warn("closing websocket over its frame limits", "user_id", c.user, "conn_id", c.id, "limit", v.what)
			go h.closeConn(c, CloseRateLimited, "rate limited: too many frames over the limit")
		}
		return false
	}
	if !v.first {
		return false
	}
	payload, _ := marshal(map[string]any{
		"message":        fmt.Sprintf("frame refused: over the %s limit; slow down (retry in %d ms)", limitName(v.what), v.retryAfter.Milliseconds()),
		"code":           "rate_limited",
		"retry_after_ms": max(v.retryAfter.Milliseconds(), 1),
	})
	frame, _ := encodeFrame(Event{Event: EventError, Payload: payload}, time.Now())
	h.write(c, frame)
	return false
}

func limitName(what string) string {
	switch what {
	case "connection":
		return "per-connection frame"
	case "user":
		return "per-user frame"
	}
	return "per-user byte"
}
