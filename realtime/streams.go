package realtime

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/realtime/internal/wire"
	"github.com/switchboard/switchboard/realtime/stream"
)

// Streams is the durable store of events (realtime/stream) on a database:
// the bus appends to it, the hub reads what its sockets missed from it, and
// GET /v1/history pages through it.
type Streams struct {
	DB db.DB
	// ReadBytes is the byte budget of one read (a history page, one read
	// of the hub's catch-up, shared by the streams it reads);
	// stream.DefaultReadBytes when zero. A read always brings at least one
	// event, so at most ReadBytes plus one event.
	ReadBytes int
}

// Append stores a batch in one round trip (stream.Append).
func (s Streams) Append(ctx context.Context, evs []stream.Event) ([]stream.Position, error) {
	return stream.Append(ctx, s.DB, evs)
}

// AppendStored stores a batch in one round trip and returns it as stored
// (stream.AppendStored).
func (s Streams) AppendStored(ctx context.Context, evs []stream.Event) ([]stream.Event, error) {
	return stream.AppendStored(ctx, s.DB, evs)
}

// ReadMany reads many streams after their cursors in one query, at most
// limit events of each and ReadBytes in all.
func (s Streams) ReadMany(ctx context.Context, cursors []stream.Cursor, limit int) ([]stream.History, error) {
	return stream.ReadMany(ctx, s.DB, cursors, stream.Limit{Events: limit, Bytes: s.ReadBytes})
}

// History is one page of a stream as clients see it: stored frames, exactly
// as a socket receives them.
type History struct {
	Stream string
	Epoch  string
	Events []json.RawMessage
	Oldest int64 // first retained offset (Last + 1 when none is)
	Last   int64
	// Next is the position to read on from (the last event's offset, or
	// since moved up to the oldest retained); More: events after it remain.
	Next int64
	More bool
	// Recovered: the events after since of epoch are all retained (with an
	// empty epoch the stream's current one is assumed).
	Recovered bool
}

// History reads stream after offset since, at most limit events and
// ReadBytes.
func (s Streams) History(ctx context.Context, name, epoch string, since int64, limit int) (History, error) {
	h, err := stream.Read(ctx, s.DB, name, since, stream.Limit{Events: limit, Bytes: s.ReadBytes})
	if err != nil {
		return History{}, err
	}
	if epoch == "" {
		epoch = h.Epoch
	}
	out := History{Stream: name, Epoch: h.Epoch, Oldest: h.Oldest, Last: h.Last, Next: h.Next(), More: h.More(),
		Recovered: h.Recovered(epoch, since),
		Events:    make([]json.RawMessage, len(h.Events))}
	for i, ev := range h.Events {
		out.Events[i] = storedFrame(ev)
	}
	return out, nil
}

// ValidateStream checks a stream name a client gave.
func ValidateStream(name string) error { return stream.ValidateStream(name) }

// appender stores events: the Streams.
type appender interface {
	AppendStored(ctx context.Context, evs []stream.Event) ([]stream.Event, error)
}

// streamReader reads what sockets missed: the Streams.
type streamReader interface {
	ReadMany(ctx context.Context, cursors []stream.Cursor, limit int) ([]stream.History, error)
}

// ephemeral reports whether an event is delivered live only, never stored:
// typing, rpc.*, server.*, presence and the server's answers to frames.
func ephemeral(name string) bool {
	switch name {
	case eventTyping, EventRoomJoined, EventError, EventResumed:
		return true
	}
	for _, p := range []string{"rpc.", "server.", "presence."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// streamOf is the stream a stored event goes to ("" when it is not
// stored: ephemeral, or for everyone).
func streamOf(ev Event) string {
	switch {
	case ephemeral(ev.Event):
		return ""
	case ev.To != "":
		return recipientStream(ev.To, ev.From)
	case ev.Room != "":
		return stream.RoomStream(ev.Room)
	case ev.Project != "":
		return stream.ProjectStream(ev.Project)
	}
	return ""
}

// recipientStream is the stream of an event addressed to user to: its
// inbox when another user sent it, its own stream when the user itself or
// the server (from empty) did. Each has its own retention, so what others
// send can push out only what others sent.
func recipientStream(to, from string) string {
	if from != "" && !strings.EqualFold(from, to) {
		return stream.InboxStream(to)
	}
	return stream.UserStream(to)
}

// streamTarget is the user or room whose sockets follow a stream (a user
// follows its user stream and its inbox); neither for a project's stream
// (streamProject).
func streamTarget(name string) (user, room string) {
	if u, ok := strings.CutPrefix(name, "user:"); ok {
		return u, ""
	}
	if u, ok := strings.CutPrefix(name, "inbox:"); ok {
		return u, ""
	}
	r, _ := strings.CutPrefix(name, "room:")
	return "", r
}

// streamProject is the project whose members' sockets follow a stream, ""
// for any other stream.
func streamProject(name string) string {
	p, _ := strings.CutPrefix(name, "project:")
	if p == name {
		return ""
	}
	return p
}

// storedFrame is the frame of a stored event: the live frame's fields plus
// stream, offset and epoch, identical whether sent live, replayed or read
// over HTTP. It writes what marshal(Frame{…}) writes, without reflection
// (every stored event a socket gets is encoded here); the payload is
// copied as it is, compacted and checked by the store.
func storedFrame(ev stream.Event) []byte {
	user, room := streamTarget(ev.Stream)
	if streamProject(ev.Stream) != "" {
		room = ""
	}
	b := make([]byte, 0, 160+len(ev.Payload)+len(ev.Stream))
	b = append(b, '{')
	b = wire.AppendField(b, true, "event", ev.Event)
	b = optionalField(b, "room", room)
	b = optionalField(b, "to", user)
	b = optionalField(b, "from", ev.From)
	b = optionalField(b, "id", ev.ID)
	if len(ev.Payload) > 0 {
		b = wire.AppendRaw(b, false, "payload", ev.Payload)
	}
	b = append(b, `,"ts":"`...)
	b = ev.TS.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = optionalField(b, "stream", ev.Stream)
	if ev.Offset != 0 {
		b = wire.AppendInt(b, false, "offset", ev.Offset)
	}
	b = optionalField(b, "epoch", ev.Epoch)
	return append(b, '}')
}

// optionalField appends a string field unless it is empty (omitempty).
func optionalField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return wire.AppendField(b, false, name, s)
}
