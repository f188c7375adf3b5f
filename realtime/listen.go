package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listenState is what readiness reports about the LISTEN connection.
type listenState struct {
	mu      sync.Mutex
	up      bool
	lastErr error
	since   time.Time
}

func (s *listenState) set(up bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up != up {
		s.since = time.Now()
	}
	s.up, s.lastErr = up, err
}

// Ready reports whether the LISTEN connection is up: the readiness check
// of a replica with sockets. A bus without a hub does not listen and is
// always ready.
func (b *Bus) Ready(context.Context) error {
	if b.hub == nil {
		return nil
	}
	s := &b.listen
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up {
		return nil
	}
	if s.lastErr == nil {
		return errors.New("LISTEN connection not established yet")
	}
	return fmt.Errorf("LISTEN connection down for %s: %v", time.Since(s.since).Round(time.Millisecond), s.lastErr)
}

// Listening reports whether the LISTEN connection is up, so that the
// notices of BusOptions.Notices are heard (never in poll-only mode).
func (b *Bus) Listening() bool {
	if b.opts.PollOnly {
		return false
	}
	b.listen.mu.Lock()
	defer b.listen.mu.Unlock()
	return b.listen.up
}

// ringNotices calls every notice's handler: LISTEN came up or went down,
// so a notice may have been missed.
func (b *Bus) ringNotices() {
	for _, fn := range b.opts.Notices {
		fn()
	}
}

// ListenApplicationName is the application_name of this node's LISTEN
// connection, as pg_stat_activity shows it.
func (b *Bus) ListenApplicationName() string { return "switchboard-listen-" + b.opts.NodeID }

// listenLoop keeps one dedicated LISTEN connection: after a drop it
// reconnects within a second (100 ms, doubling, at most 1 s between tries).
func (b *Bus) listenLoop(ctx context.Context, up chan<- struct{}) {
	var once sync.Once
	onUp := func() { once.Do(func() { close(up) }) }
	const minDelay, maxDelay = 100 * time.Millisecond, time.Second
	delay := minDelay
	for {
		start := time.Now()
		err := b.listenOnce(ctx, onUp)
		if ctx.Err() != nil {
			b.listen.set(false, errors.New("stopped"))
			return
		}
		b.listen.set(false, err)
		b.metrics.listenUp.Set(0)
		b.ringNotices()
		if time.Since(start) > 10*time.Second {
			delay = minDelay
		}
		b.logger.Warn("LISTEN connection lost; reconnecting", "error", err, "retry_in", delay.String())
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		delay = min(2*delay, maxDelay)
		b.metrics.reconnects.Inc()
	}
}

// listenOnce connects, LISTENs and handles notifications until the
// connection fails. Idle for IdlePing: a ping must answer within 2 s.
func (b *Bus) listenOnce(ctx context.Context, onUp func()) error {
	cfg := b.opts.ListenConfig.Copy()
	cfg.RuntimeParams["application_name"] = b.ListenApplicationName()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if err := b.listenChannels(ctx, conn); err != nil {
		return err
	}
	b.listen.set(true, nil)
	b.metrics.listenUp.Set(1)
	onUp()
	b.ringNotices()
	if b.hub != nil {
		// What was appended while this replica was not listening is read
		// now: from here on every append rings this connection.
		b.hub.revalidateRooms(ctx) // room_access.go: notices may have been missed
		b.hub.catchUp()
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, b.opts.IdlePing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if n != nil {
			if fn, ok := b.opts.Notices[n.Channel]; ok {
				fn()
			} else {
				b.receive(ctx, conn, n.Payload)
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case pgconn.Timeout(err):
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			b.metrics.pings.Inc()
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		default:
			return err
		}
	}
}

// listenChannels LISTENs on the bus's channel (with a hub: there are
// sockets here to deliver to) and on every notice channel.
func (b *Bus) listenChannels(ctx context.Context, conn *pgx.Conn) error {
	var channels []string
	if b.hub != nil {
		channels = append(channels, Channel)
	}
	for ch := range b.opts.Notices {
		channels = append(channels, ch)
	}
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	return nil
}

// receive handles one notification from another node: it skips its own and
// those for nobody here before fetching a spilled body.
func (b *Bus) receive(ctx context.Context, conn *pgx.Conn, payload string) {
	origin, doorbell, ok := peekNotification(payload)
	kind := ""
	if !ok {
		var probe struct {
			Origin string `json:"o"`
			Kind   string `json:"k"`
		}
		if err := json.Unmarshal([]byte(payload), &probe); err != nil {
			b.logger.Warn("bus: unreadable notification", "error", err)
			return
		}
		origin, kind = probe.Origin, probe.Kind
		doorbell = kind == "" // a stream doorbell (stream.Doorbell has no kind)
	}
	switch {
	case origin == b.opts.NodeID:
		if doorbell {
			b.receiveOwnDoorbell(payload)
		}
		return
	case doorbell:
		b.receiveDoorbell(payload)
		return
	case kind == kindEvict:
		b.receiveEvict(ctx, payload) // room_access.go
		return
	case kind == kindProjectEvict:
		b.receiveProjectEvict(payload) // project_access.go
		return
	}
	var env envelope
	if err := json.Unmarshal([]byte(payload), &env); err != nil {
		b.logger.Warn("bus: unreadable notification", "error", err)
		return
	}
	if !b.forThisNode(env) {
		return
	}
	if env.Spill != "" {
		full, err := fetchSpilled(ctx, conn, env.Spill)
		if err != nil {
			b.logger.Warn("bus: spilled message unavailable", "spill_id", env.Spill, "error", err)
			return
		}
		env = full
	}
	b.metrics.received.Inc()
	b.dispatch(env)
}

// peekNotification reads a notification's origin, and whether it is a
// doorbell or an envelope, from how every node writes them: the origin
// first, then a doorbell's ranges ("r", an array) or an envelope's
// sequence number ("n"). Anything else (ok false) is decoded in full: a
// node's own notifications, most of what it hears, are then skipped
// without being parsed.
func peekNotification(payload string) (origin string, doorbell, ok bool) {
	rest, found := strings.CutPrefix(payload, `{"o":"`)
	if !found {
		return "", false, false
	}
	end := strings.IndexByte(rest, '"')
	if end < 0 || strings.IndexByte(rest[:end], '\\') >= 0 {
		return "", false, false
	}
	origin, rest = rest[:end], rest[end+1:]
	switch {
	case strings.HasPrefix(rest, `,"r":[`):
		return origin, true, true
	case strings.HasPrefix(rest, `,"n":`):
		return origin, false, true
	}
	return "", false, false
}

func fetchSpilled(ctx context.Context, conn *pgx.Conn, id string) (envelope, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var body []byte
	if err := conn.QueryRow(ctx, `SELECT body FROM bus_spill WHERE id = $1`, id).Scan(&body); err != nil {
		return envelope{}, fmt.Errorf("fetch spilled: %w", err)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return envelope{}, fmt.Errorf("decode spilled: %w", err)
	}
	return env, nil
}
