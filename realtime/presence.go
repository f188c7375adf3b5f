package realtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
)

// Presence frames, sent to the members of a room (docs/api.md "Presence").
// They are ephemeral: never stored in a stream.
const (
	EventPresenceJoin  = "presence.join"
	EventPresenceLeave = "presence.leave"
)

// PresenceOptions configure a PresenceTracker; zero values mean defaults.
// The tracker writes with the pool of the bus New builds it with, as that
// bus's node (the cluster's id, a UUID), and logs where it does.
type PresenceOptions struct {
	// Nodes says which other nodes are dead (the cluster). Nil: this node
	// never ends another node's presence.
	Nodes nodeLiveness
	// SuspectAfter: a node silent this long is named in
	// Presence.UnavailableNodes while it still holds members. Default 5 s.
	SuspectAfter time.Duration
	// MaxBatch is the most (room, user) changes written in one
	// transaction; default 500.
	MaxBatch int
	// RetryEvery is the pause after a failed write; default 1 s.
	RetryEvery time.Duration
	// ResyncEvery is how often the node compares its rows with its sockets
	// (rows a survivor deleted while this node was stalled come back);
	// default 10 s.
	ResyncEvery time.Duration
	// StopTimeout bounds Stop's last writes; default 5 s.
	StopTimeout time.Duration
}

// nodeLiveness is what presence needs from cluster membership.
type nodeLiveness interface {
	// DeadNodes lists the other nodes judged dead and how long until the
	// next live one could be (when to ask again).
	DeadNodes(ctx context.Context) (dead []string, next time.Duration, err error)
}

// presenceHook is what the hub tells when a user's local sockets in a room
// change (join, leave, close, eviction): the PresenceTracker.
type presenceHook interface {
	changed(room, user string)
}

// presenceChanged is called by the hub, under h.mu, when a socket of user
// joined or left room.
func (h *Hub) presenceChanged(room, user string) {
	if h.presence != nil {
		h.presence.changed(room, user)
	}
}

type presenceKey struct{ room, user string }

// presenceCounts counts user's sockets in room here, for each key.
func (s *sockets) presenceCounts(keys []presenceKey) []int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	byRoom := map[string]map[string]int{}
	out := make([]int, len(keys))
	for i, k := range keys {
		users, ok := byRoom[k.room]
		if !ok {
			users = map[string]int{}
			for c := range s.byRoom[k.room] {
				users[c.user]++
			}
			byRoom[k.room] = users
		}
		out[i] = users[k.user]
	}
	return out
}

// presenceLocal is every (room, user) with sockets here, and how many.
func (s *sockets) presenceLocal() map[presenceKey]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[presenceKey]int{}
	for room, set := range s.byRoom {
		for c := range set {
			out[presenceKey{room, c.user}]++
		}
	}
	return out
}

// PresenceTracker keeps this node's rows of the presence table equal to
// its sockets' rooms and announces joins and leaves. The hub marks a
// (room, user) changed; one goroutine writes the changed keys in batches,
// reading the counts from the hub when it writes (so a burst of changes is
// one write, and a socket close that leaves many rooms is one
// transaction). A transaction that inserts the first row of a (room, user)
// across all nodes NOTIFYs presence.join, one that deletes the last
// NOTIFYs presence.leave; every node, this one included, delivers those
// notifications to its sockets in the room, in commit order. A second
// goroutine ends the presence of dead nodes (sweep).
type PresenceTracker struct {
	PresenceReader
	opts   PresenceOptions
	nodeID string
	local  *sockets // the hub's sockets, whose rooms it writes
	logger *slog.Logger
	base   startstop.Base
	seq    atomic.Uint64

	mu    sync.Mutex
	dirty map[presenceKey]struct{}
	wake  chan struct{}

	storedRows int // rows the last resync found (writer goroutine only)
}

// newPresence builds the tracker of the rooms of local, the hub's sockets,
// writing to q as node nodeID; New makes the hub tell it of every change.
func newPresence(opts PresenceOptions, q db.DB, nodeID string, local *sockets, logger *slog.Logger) *PresenceTracker {
	opts.MaxBatch = cmp.Or(opts.MaxBatch, 500)
	opts.RetryEvery = cmp.Or(opts.RetryEvery, time.Second)
	opts.ResyncEvery = cmp.Or(opts.ResyncEvery, 10*time.Second)
	opts.StopTimeout = cmp.Or(opts.StopTimeout, 5*time.Second)
	return &PresenceTracker{
		PresenceReader: PresenceReader{DB: q, SuspectAfter: opts.SuspectAfter},
		opts:           opts, nodeID: nodeID, local: local, logger: logger.With("component", "presence"),
		dirty: map[presenceKey]struct{}{}, wake: make(chan struct{}, 1),
	}
}

// changed marks (room, user) for the next write. Users that are not UUIDs
// (never a real account) are not tracked.
func (p *PresenceTracker) changed(room, user string) {
	if _, err := uuid.Parse(user); err != nil {
		return
	}
	p.mu.Lock()
	p.dirty[presenceKey{room, user}] = struct{}{}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Start runs the writer and, with Nodes, the sweeper. A second Start is
// refused (startstop.ErrStarted).
func (p *PresenceTracker) Start(ctx context.Context) error {
	runCtx, err := p.base.Begin(ctx)
	if err != nil {
		return fmt.Errorf("start presence: %w", err)
	}
	p.base.Go(func() { p.writeLoop(runCtx) })
	if p.opts.Nodes != nil {
		p.base.Go(func() { p.sweepLoop(runCtx) })
	}
	return nil
}

// Stop stops both goroutines, writes what is still marked and ends this
// node's presence everywhere (leaves where it held a user's last socket in
// a room), within StopTimeout. Before Start it does nothing.
func (p *PresenceTracker) Stop() {
	if !p.base.Started() {
		return
	}
	p.base.StopWith(func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.StopTimeout)
		defer cancel()
		for p.pending() && ctx.Err() == nil {
			if err := p.flush(ctx); err != nil {
				break
			}
		}
		if _, err := p.Sweep(ctx, []string{p.nodeID}); err != nil {
			p.logger.Warn("presence not ended; it ends when the node is judged dead", "error", err)
		}
	})
}

// StopWriting stops the tracker but leaves this node's rows, as a crashed
// process would: the others end its presence when it is judged dead.
// Tests of failure handling use it; a later Stop does nothing more.
func (p *PresenceTracker) StopWriting() { p.base.Stop() }

func (p *PresenceTracker) pending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.dirty) > 0
}

func (p *PresenceTracker) writeLoop(ctx context.Context) {
	resync := time.NewTicker(p.opts.ResyncEvery)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-resync.C:
			if err := p.resync(ctx); err != nil && ctx.Err() == nil {
				p.logger.Warn("presence resync failed", "error", err)
			}
		}
		for p.pending() && ctx.Err() == nil {
			if err := p.flush(ctx); err != nil && ctx.Err() == nil {
				p.logger.Warn("presence not written; retrying", "error", err, "retry_in", p.opts.RetryEvery.String())
				p.sleep(ctx, p.opts.RetryEvery)
			}
		}
	}
}

// sleep waits d, or until ctx ends.
func (p *PresenceTracker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// take removes up to n marked keys.
func (p *PresenceTracker) take(n int) []presenceKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]presenceKey, 0, min(n, len(p.dirty)))
	for k := range p.dirty {
		if len(keys) == n {
			break
		}
		keys = append(keys, k)
		delete(p.dirty, k)
	}
	return keys
}

func (p *PresenceTracker) mark(keys []presenceKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		p.dirty[k] = struct{}{}
	}
}

// flush writes one batch of marked keys with the hub's counts as they are
// now; on failure the keys stay marked.
func (p *PresenceTracker) flush(ctx context.Context) error {
	keys := p.take(p.opts.MaxBatch)
	if len(keys) == 0 {
		return nil
	}
	err := p.write(ctx, keys, p.local.presenceCounts(keys))
	if err != nil {
		p.mark(keys)
	}
	return err
}

// write sets this node's rows for keys to counts (0 deletes) and announces
// the users whose first or last row across all nodes it inserted or
// deleted, in one transaction under the keys' locks.
func (p *PresenceTracker) write(ctx context.Context, keys []presenceKey, counts []int) error {
	return p.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockPresence(ctx, tx, keys); err != nil {
			return err
		}
		changes, err := presenceSet(ctx, tx, p.nodeID, keys, counts)
		if err != nil {
			return err
		}
		return p.announce(ctx, tx, changes)
	})
}

// Sweep ends the presence of nodes (dead ones, or this one stopping): it
// deletes their rows and announces presence.leave for every user who has
// no row left on another node, in one transaction under the keys' locks,
// so when two survivors sweep the same node only the first announces.
// It returns how many leaves it announced.
func (p *PresenceTracker) Sweep(ctx context.Context, nodes []string) (int, error) {
	left := 0
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		keys, err := presenceKeysOf(ctx, tx, nodes)
		if err != nil || len(keys) == 0 {
			return err
		}
		if err := lockPresence(ctx, tx, keys); err != nil {
			return err
		}
		leaves, err := presenceDeleteNodes(ctx, tx, nodes, keys)
		if err != nil {
			return err
		}
		left = len(leaves)
		return p.announce(ctx, tx, leaves)
	})
	return left, err
}

func (p *PresenceTracker) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	tx, err := p.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("presence: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("presence: commit: %w", err)
	}
	return nil
}

// presenceChange is a user's first row in a room inserted (joined) or
// last one deleted.
type presenceChange struct {
	room, user string
	joined     bool
}

// announce NOTIFYs the changes inside tx: they reach the other nodes (and
// this one: the origin is not this node's) only if tx commits, in commit
// order, which the keys' locks make the order of the changes.
func (p *PresenceTracker) announce(ctx context.Context, tx pgx.Tx, changes []presenceChange) error {
	if len(changes) == 0 {
		return nil
	}
	payloads := make([]string, 0, len(changes))
	for _, c := range changes {
		body, err := p.envelope(c)
		if err != nil {
			return err
		}
		payloads = append(payloads, body)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, x) FROM unnest($2::text[]) AS x`, Channel, payloads); err != nil {
		return fmt.Errorf("announce presence: %w", err)
	}
	return nil
}

func (p *PresenceTracker) envelope(c presenceChange) (string, error) {
	name := EventPresenceLeave
	if c.joined {
		name = EventPresenceJoin
	}
	payload, err := marshal(struct {
		UserID string `json:"user_id"`
	}{c.user})
	if err != nil {
		return "", err
	}
	frame, err := encodeFrame(Event{Event: name, Room: c.room, ID: uuid.NewString(), Payload: payload}, time.Now())
	if err != nil {
		return "", err
	}
	body, err := marshal(envelope{Origin: "presence:" + p.nodeID, Seq: p.seq.Add(1), Kind: kindEvent, Room: c.room, Frame: frame})
	return string(body), err
}

// resync marks every key whose row differs from the hub's sockets: rows a
// survivor deleted while this node was stalled past the expiry, or rows
// left by a failed write.
func (p *PresenceTracker) resync(ctx context.Context) error {
	local := p.local.presenceLocal()
	if len(local) == 0 && p.storedRows == 0 {
		return nil // an idle node asks nothing; Stop's sweep ends what a failure left
	}
	stored, err := presenceOfNode(ctx, p.DB, p.nodeID)
	if err != nil {
		return err
	}
	p.storedRows = len(stored)
	var off []presenceKey
	for k, n := range local {
		if stored[k] != n {
			off = append(off, k)
		}
	}
	for k := range stored {
		if _, ok := local[k]; !ok {
			off = append(off, k)
		}
	}
	if len(off) > 0 {
		p.logger.Warn("presence rows differ from this node's sockets; rewriting them", "keys", len(off))
		p.mark(off)
	}
	return nil
}

// sweepLoop ends dead nodes' presence as soon as they are judged dead: it
// asks the cluster when the next node could be, and asks again just then.
func (p *PresenceTracker) sweepLoop(ctx context.Context) {
	swept := map[string]bool{}
	for ctx.Err() == nil {
		p.sleep(ctx, p.sweepOnce(ctx, swept))
	}
}

// sweepOnce sweeps the dead nodes not swept yet and says when to look again.
func (p *PresenceTracker) sweepOnce(ctx context.Context, swept map[string]bool) time.Duration {
	dead, next, err := p.opts.Nodes.DeadNodes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.logger.Warn("presence: could not read dead nodes", "error", err)
		}
		return p.opts.RetryEvery
	}
	var todo []string
	for _, id := range dead {
		if !swept[id] {
			todo = append(todo, id)
		}
	}
	if len(todo) > 0 {
		n, err := p.Sweep(ctx, todo)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				p.logger.Warn("presence of dead nodes not ended; retrying", "nodes", todo, "error", err)
			}
			return p.opts.RetryEvery
		}
		if n > 0 {
			p.logger.Info("ended the presence of dead nodes", "nodes", todo, "leaves", n)
		}
	}
	clear(swept)
	for _, id := range dead {
		swept[id] = true
	}
	return min(max(next+10*time.Millisecond, 10*time.Millisecond), 30*time.Second)
}
