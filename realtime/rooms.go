package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard/switchboard/infra/names"
	"github.com/switchboard/switchboard/realtime/stream"
)

// A socket's rooms: room.join (optionally from a position in the room's
// stream), room.leave, and the check that a socket posts only to rooms it
// joined. Who may use a members-only room is room_access.go's.

// join adds c to room and follows its stream, from pos when given (then
// the missed events and a resumed frame follow room.joined).
func (h *Hub) join(c *client, room string, pos *position) error {
	if err := names.Room(room); err != nil {
		return err
	}
	gen := h.evictions.Load()
	if err := h.mayUseRoom(c, room); err != nil {
		return err
	}
	defer h.recheckJoin(c, room, gen)
	var req *resumeReq
	var head *position
	if pos != nil {
		req = newResume()
	} else if !h.follows(c, stream.RoomStream(room)) {
		var err error
		if head, err = h.head(context.Background(), stream.RoomStream(room)); err != nil {
			return err
		}
	}
	err := h.joinFollow(c, room, pos, head, req)
	if req != nil {
		h.resumeRegistered(c, req)
	}
	return err
}

// joinFollow joins c to room (answering room.joined) and follows its
// stream from pos, or from head when it does not yet.
func (h *Hub) joinFollow(c *client, room string, pos, head *position, req *resumeReq) error {
	h.mu.Lock()
	if _, ok := c.rooms[room]; !ok {
		if len(c.rooms) >= h.opts.MaxRooms {
			h.mu.Unlock()
			return fmt.Errorf("a connection may join at most %d rooms; leave one first", h.opts.MaxRooms)
		}
		h.joinLocked(c, room)
		h.presenceChanged(room, c.user)
	}
	rooms := roomList(c)
	frame, _ := encodeFrame(Event{Event: EventRoomJoined, Room: room}, time.Now())
	c.mu.Lock()
	h.writeLocked(c, frame)
	h.followLocked(c, stream.RoomStream(room), pos, head, req)
	c.mu.Unlock()
	h.mu.Unlock()
	c.s.Set(KeyRooms, rooms)
	return nil
}

// joinPosition reads room.join's optional payload {"offset","epoch"}.
func joinPosition(payload json.RawMessage) (*position, error) {
	var p struct {
		Offset *int64 `json:"offset"`
		Epoch  string `json:"epoch"`
	}
	if len(payload) == 0 || payload[0] != '{' {
		return nil, nil // no position: a payload that is not an object is ignored
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf(`room.join payload must be {"offset":<int>,"epoch":"<epoch>"}: %v`, err)
	}
	switch {
	case p.Offset == nil:
		return nil, nil
	case *p.Offset < 0:
		return nil, fmt.Errorf("room.join offset %d is negative", *p.Offset)
	}
	return &position{Offset: *p.Offset, Epoch: p.Epoch}, nil
}

func (h *Hub) leave(c *client, room string) error {
	if err := names.Room(room); err != nil {
		return err
	}
	h.leaveRoom(c, room)
	return nil
}

// leaveRoom takes c out of room and ends its follow of the room's stream:
// room.leave and evictions (room_access.go) alike. It reports whether c was in
// the room.
func (h *Hub) leaveRoom(c *client, room string) bool {
	h.mu.Lock()
	_, was := c.rooms[room]
	if was {
		h.presenceChanged(room, c.user)
	}
	h.leaveLocked(c, room)
	rooms := roomList(c)
	c.mu.Lock()
	h.unfollowLocked(c, stream.RoomStream(room))
	s := c.s
	c.mu.Unlock()
	h.mu.Unlock()
	if s != nil {
		s.Set(KeyRooms, rooms)
	}
	return was
}

// roomList is c's rooms, sorted; the caller holds Hub.mu.
func roomList(c *client) []string {
	rooms := make([]string, 0, len(c.rooms))
	for r := range c.rooms {
		rooms = append(rooms, r)
	}
	slices.Sort(rooms)
	return rooms
}

func (h *Hub) requireMember(c *client, room string) error {
	if err := names.Room(room); err != nil {
		return err
	}
	h.mu.RLock()
	_, ok := c.rooms[room]
	h.mu.RUnlock()
	if !ok {
		return fmt.Errorf("join room %q before posting to it", room)
	}
	return nil
}
