package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/realtime/stream"
)

// Members-only rooms. The hub asks RoomAccess before a socket joins a room
// (room.join, or a room stream in a resume); posting and typing need the
// room joined, so they follow. When access is taken away (roomstore.go)
// the change notifies every replica in its own transaction, and each
// replica evicts the sockets concerned: they leave the room through the
// same path as room.leave and get a room.removed frame.
//
// Nothing posted after the change reaches an evicted socket on any
// replica. Postgres delivers notifications in commit order, and the LISTEN
// loop handles them one at a time, so the eviction is applied before the
// doorbell of any event committed after the change — including this
// replica's own appends: with RoomAccess set, a replica delivers its own
// room events to its sockets when their doorbell comes back through LISTEN,
// not straight after the append (localOffers). Events read from the store
// (gaps, joins, resumes, catch-up) are not ordered with notifications, so
// before a read's room events are written the hub checks its followers'
// access in the database, in a snapshot taken after the read (guardReads).
// After LISTEN (re)connects, notifications may have been missed: every
// local socket's rooms are checked again (revalidateRooms). A join racing
// an eviction is checked again after it was indexed (join).

// roomGuard applies access changes to the sockets here: the hub, which
// evicts them from the rooms they may no longer use.
type roomGuard interface {
	// guarded reports whether access to a stream is checked here; then
	// the bus delivers this replica's own events of it through LISTEN.
	guarded(name string) bool
	// hasFollowers reports whether a socket here may follow a stream.
	hasFollowers(name string) bool
	// evict applies an access change's notice.
	evict(ctx context.Context, n evictNotice)
	// applyProjectNotice applies a membership-ended notice.
	applyProjectNotice(n projectNotice)
	// revalidateRooms checks every socket's rooms and projects again.
	revalidateRooms(ctx context.Context)
}

// RoomAccess is what the hub asks about members-only rooms: Rooms.
type RoomAccess interface {
	// CanUseRoom reports whether user may join, post to and read room.
	CanUseRoom(ctx context.Context, room, user string) (bool, error)
	// Denied returns, of the users asked about per room, those who may
	// not use it now.
	Denied(ctx context.Context, ask map[string][]string) (map[string][]string, error)
}

// EventRoomRemoved tells a socket it was evicted from a room; payload
// {"room","reason"}.
const EventRoomRemoved = "room.removed"

// Reasons of room.removed.
const (
	// ReasonRemoved: the user is not (or no longer) a member of the
	// members-only room.
	ReasonRemoved = "removed"
	// ReasonDeleted: the room was deleted.
	ReasonDeleted = "deleted"
	// reasonRecheck (notices only): check everyone in the room, evicting
	// those who may not use it with ReasonRemoved.
	reasonRecheck = "recheck"
)

// CodeRoomForbidden is the error frame code of a room.join (or resumed
// room) the user may not use.
const CodeRoomForbidden = "room_forbidden"

// ErrRoomForbidden: the user is not a member of the members-only room.
var ErrRoomForbidden = errors.New("this room is for its members only")

// kindEvict is the notification of an access change (wire value).
const kindEvict = "x"

// evictNotice is sent in the transaction of the change. It has no origin:
// every replica, the changing one too, applies it from LISTEN.
type evictNotice struct {
	Kind   string `json:"k"`
	Room   string `json:"r"`
	User   string `json:"u,omitempty"` // empty: everyone (deleted) or everyone denied (recheck)
	Reason string `json:"y"`
}

func notifyEvict(ctx context.Context, tx pgx.Tx, n evictNotice) error {
	n.Kind = kindEvict
	body, err := marshal(n)
	if err != nil {
		return err
	}
	// Room names are at most 128 bytes: a notice is far below NOTIFY's limit.
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, string(body))
	return err
}

// mayUseRoom checks with RoomAccess that c's user may use room.
func (h *Hub) mayUseRoom(c *client, room string) error {
	if h.opts.Rooms == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	ok, err := h.opts.Rooms.CanUseRoom(ctx, room, c.user)
	switch {
	case err != nil:
		h.logger.Warn("room access not checked", "room", room, "error", err)
		return fmt.Errorf("room %q: %w", room, ErrUnavailable)
	case !ok:
		return &frameError{code: CodeRoomForbidden, err: fmt.Errorf("room %q: %w; its owner or an admin adds members", room, ErrRoomForbidden)}
	}
	return nil
}

// recheckJoin checks c's access to room once more after the join was
// indexed when an eviction was applied since gen: the eviction may have
// looked at the room before c was in it.
func (h *Hub) recheckJoin(c *client, room string, gen uint64) {
	if h.opts.Rooms == nil || h.evictions.Load() == gen {
		return
	}
	if err := h.mayUseRoom(c, room); err != nil {
		h.evictClient(c, room, ReasonRemoved)
	}
}

// resumeAccess checks the rooms of a resume's streams and returns those
// the user may not use; any other failure refuses the whole resume.
func (h *Hub) resumeAccess(c *client, names []string) (map[string]bool, error) {
	forbidden := map[string]bool{}
	for _, name := range names {
		_, room := streamTarget(name)
		if room == "" {
			continue
		}
		err := h.mayUseRoom(c, room)
		switch {
		case errors.Is(err, ErrRoomForbidden):
			forbidden[room] = true
		case err != nil:
			return nil, err
		}
	}
	return forbidden, nil
}

// refuseRoom answers a resumed room the user may not use (any more) with
// room.removed, evicting the socket if it is in it: the client drops the
// room instead of rejoining it.
func (h *Hub) refuseRoom(c *client, room string) {
	h.leaveRoom(c, room)
	h.write(c, removedFrame(room, ReasonRemoved))
}

// evict applies a notice: the sockets here of its user (or everyone, or
// everyone denied) leave the room with room.removed.
func (h *Hub) evict(ctx context.Context, n evictNotice) {
	h.evictions.Add(1)
	if n.Reason == reasonRecheck {
		h.evictDenied(ctx, map[string]bool{n.Room: true})
		return
	}
	for _, c := range h.roomClients(n.Room, n.User) {
		h.evictClient(c, n.Room, n.Reason)
	}
}

// evictClient makes c leave room and tells it why; nothing if it was not
// in the room.
func (h *Hub) evictClient(c *client, room, reason string) {
	if h.leaveRoom(c, room) {
		h.write(c, removedFrame(room, reason))
	}
}

func removedFrame(room, reason string) []byte {
	payload, _ := marshal(map[string]string{"room": room, "reason": reason})
	frame, _ := encodeFrame(Event{Event: EventRoomRemoved, Room: room, Payload: payload}, time.Now())
	return frame
}

// evictDenied checks the access of every socket here in rooms (all rooms
// with sockets when nil) and evicts those denied. On a database error the
// check is retried every second until it succeeds: a socket is never left
// in a room it may not use (until ctx ends: the bus stops).
func (h *Hub) evictDenied(ctx context.Context, rooms map[string]bool) {
	if h.opts.Rooms == nil {
		return
	}
	for {
		ask := h.roomUsers(rooms)
		if len(ask) == 0 {
			return
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		denied, err := h.opts.Rooms.Denied(qctx, ask)
		cancel()
		if err == nil {
			h.evictUsers(denied, ReasonRemoved)
			return
		}
		h.logger.Warn("room access not checked; retrying", "rooms", len(ask), "error", err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		}
	}
}

func (h *Hub) evictUsers(denied map[string][]string, reason string) {
	for room, users := range denied {
		for _, u := range users {
			for _, c := range h.roomClients(room, u) {
				h.evictClient(c, room, reason)
			}
		}
	}
}

// revalidateRooms checks every socket's rooms and projects again: after
// LISTEN (re)connected, eviction notices may have been missed.
func (h *Hub) revalidateRooms(ctx context.Context) {
	h.evictDenied(ctx, nil)
	h.revalidateProjects(ctx)
}

// guardReads evicts, before a read's events are written, the followers of
// its room streams who may not use the room now: the read may hold events
// committed after an eviction this replica has not applied yet. An error
// fails the read (it is retried).
func (h *Hub) guardReads(hs []stream.History) error {
	if h.opts.Rooms == nil {
		return nil
	}
	rooms := map[string]bool{}
	for _, hist := range hs {
		if _, room := streamTarget(hist.Stream); room != "" && len(hist.Events) > 0 {
			rooms[room] = true
		}
	}
	if len(rooms) == 0 {
		return nil
	}
	ask := h.roomUsers(rooms)
	if len(ask) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	denied, err := h.opts.Rooms.Denied(ctx, ask)
	if err != nil {
		return err
	}
	h.evictUsers(denied, ReasonRemoved)
	return nil
}

// receiveEvict applies an access change's notice.
func (b *Bus) receiveEvict(ctx context.Context, payload string) {
	var n evictNotice
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.Room == "" {
		b.logger.Warn("bus: unreadable room notice", "error", err)
		return
	}
	b.metrics.received.Inc()
	if b.hub != nil {
		b.hub.evict(ctx, n)
	}
}
