package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/olahol/melody"
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
	defer h.endHold(c)
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
	if err := h.bus.Publish(ctx, ev); err != nil {
		h.logger.Warn("client event not published to other nodes", "event", ev.Event, "error", err)
		return errors.New("the message could not be sent to every node; try again")
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
