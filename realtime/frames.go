package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/olahol/melody"

	"github.com/switchboard/switchboard/infra/names"
	"github.com/switchboard/switchboard/realtime/stream"
)

// Client frame events.
const (
	eventRoomJoin    = "room.join"
	eventRoomLeave   = "room.leave"
	eventRoomMessage = "room.message"
	eventDM          = "dm"
	eventTyping      = "typing"
	eventRPCResult   = "rpc.result"
	eventResume      = "resume"
)

// NormalizeUserID returns the canonical form of a user id, or an error.
func NormalizeUserID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf(`"to" must be a user id (a UUID), got %q`, id)
	}
	return u.String(), nil
}

// onFrame handles one text frame from a client. A bad frame is answered
// with an error event and never closes the connection; frames over the
// rate limits can (admitFrame).
func (h *Hub) onFrame(s *melody.Session, msg []byte) {
	c := clientOf(s)
	if c == nil {
		return
	}
	// A new socket's held user stream starts after its first frame, handled
	// or refused: after a resume sent first has positioned it.
	defer h.releaseHeld(c)
	if c.closing.Load() || !h.admitFrame(c, len(msg)) {
		return
	}
	if int64(len(msg)) > h.opts.MaxFrameBytes {
		h.sendError(c, "", fmt.Sprintf("frame is %d bytes; the limit is %d", len(msg), h.opts.MaxFrameBytes))
		return
	}
	if !utf8.Valid(msg) {
		h.sendError(c, "", "frame is not valid UTF-8 text")
		return
	}
	var f Frame
	if err := json.Unmarshal(msg, &f); err != nil {
		h.sendError(c, "", "frame is not a valid JSON object: "+err.Error())
		return
	}
	if err := h.handle(c, f); err != nil {
		h.sendErrorCode(c, f.ID, errorCode(err), err.Error())
	}
}

func (h *Hub) handle(c *client, f Frame) error {
	switch f.Event {
	case eventRoomJoin:
		pos, err := joinPosition(f.Payload)
		if err != nil {
			return err
		}
		return h.join(c, f.Room, pos)
	case eventRoomLeave:
		return h.leave(c, f.Room)
	case eventRoomMessage:
		if err := h.requireMember(c, f.Room); err != nil {
			return err
		}
		return h.publish(Event{Event: eventRoomMessage, Room: f.Room, From: c.user, Payload: f.Payload})
	case eventDM:
		to, err := NormalizeUserID(f.To)
		if err != nil {
			return err
		}
		return h.publish(Event{Event: eventDM, To: to, From: c.user, Payload: f.Payload})
	case eventTyping:
		return h.typing(c, f)
	case eventRPCResult:
		return h.result(c, f)
	case eventResume:
		return h.resume(c, f.Payload)
	case "":
		return errors.New(`frame has no "event"`)
	}
	return fmt.Errorf("unknown event %q; clients send room.join, room.leave, room.message, dm, typing, rpc.result or resume", f.Event)
}

func (h *Hub) typing(c *client, f Frame) error {
	switch {
	case (f.To == "") == (f.Room == ""):
		return errors.New(`typing needs exactly one of "to" and "room"`)
	case f.Room != "":
		if err := h.requireMember(c, f.Room); err != nil {
			return err
		}
		return h.publish(Event{Event: eventTyping, Room: f.Room, From: c.user, Payload: f.Payload})
	}
	to, err := NormalizeUserID(f.To)
	if err != nil {
		return err
	}
	return h.publish(Event{Event: eventTyping, To: to, From: c.user, Payload: f.Payload})
}

// publish sends a client's event through the bus to every replica.
func (h *Hub) publish(ev Event) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.pub.Publish(ctx, ev); err != nil {
		h.logger.Warn("client event not published to other nodes", "event", ev.Event, "error", err)
		return errors.New("the message could not be sent to every node; try again")
	}
	return nil
}

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
		h.releaseResume(c, req)
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
		c.rooms[room] = struct{}{}
		addTo(h.byRoom, room, c)
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
		return nil, nil // no position (a payload of another kind is ignored, as before)
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

// follows reports whether c follows name.
func (h *Hub) follows(c *client, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.follows[name] != nil
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
	delete(c.rooms, room)
	removeFrom(h.byRoom, room, c)
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

// sendError answers a bad frame with an error event; id echoes the frame's.
func (h *Hub) sendError(c *client, id, message string) { h.sendErrorCode(c, id, "", message) }

// sendErrorCode is sendError with a documented code in the payload
// (none when code is empty).
func (h *Hub) sendErrorCode(c *client, id, code, message string) {
	if c == nil {
		return
	}
	h.metrics.badFrames.Inc()
	p := map[string]string{"message": message}
	if code != "" {
		p["code"] = code
	}
	payload, _ := marshal(p)
	frame, _ := encodeFrame(Event{Event: EventError, ID: id, Payload: payload}, time.Now())
	h.write(c, frame)
}

// frameError is an error frame with a code.
type frameError struct {
	code string
	err  error
}

func (e *frameError) Error() string { return e.err.Error() }

func (e *frameError) Unwrap() error { return e.err }

// errorCode is the code of an error frame answering err ("" for none).
func errorCode(err error) string {
	var fe *frameError
	if errors.As(err, &fe) {
		return fe.code
	}
	return ""
}
