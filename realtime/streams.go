package realtime

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/realtime/stream"
)

// Streams is the durable store of events (realtime/stream) on a database:
// the bus appends to it, the hub reads what its sockets missed from it, and
// GET /v1/history pages through it.
type Streams struct {
	DB db.DB
}

// Append stores a batch in one round trip (stream.Append).
func (s Streams) Append(ctx context.Context, evs []stream.Event) ([]stream.Position, error) {
	return stream.Append(ctx, s.DB, evs)
}

// ReadMany reads many streams after their cursors in one query.
func (s Streams) ReadMany(ctx context.Context, cursors []stream.Cursor, limit int) ([]stream.History, error) {
	return stream.ReadMany(ctx, s.DB, cursors, limit)
}

// History is one page of a stream as clients see it: stored frames, exactly
// as a socket receives them.
type History struct {
	Stream string
	Epoch  string
	Events []json.RawMessage
	Oldest int64 // first retained offset (Last + 1 when none is)
	Last   int64
	// Recovered: the events after since of epoch are all retained (with an
	// empty epoch the stream's current one is assumed).
	Recovered bool
}

// History reads stream after offset since, at most limit events.
func (s Streams) History(ctx context.Context, name, epoch string, since int64, limit int) (History, error) {
	h, err := stream.Read(ctx, s.DB, name, since, limit)
	if err != nil {
		return History{}, err
	}
	if epoch == "" {
		epoch = h.Epoch
	}
	out := History{Stream: name, Epoch: h.Epoch, Oldest: h.Oldest, Last: h.Last, Recovered: h.Recovered(epoch, since),
		Events: make([]json.RawMessage, len(h.Events))}
	for i, ev := range h.Events {
		out.Events[i] = storedFrame(ev)
	}
	return out, nil
}

// ValidateStream checks a stream name a client gave.
func ValidateStream(name string) error { return stream.ValidateStream(name) }

// appender stores events: the Streams.
type appender interface {
	Append(ctx context.Context, evs []stream.Event) ([]stream.Position, error)
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
		return stream.UserStream(ev.To)
	case ev.Room != "":
		return stream.RoomStream(ev.Room)
	}
	return ""
}

// streamTarget is the user or room whose sockets follow a stream.
func streamTarget(name string) (user, room string) {
	if u, ok := strings.CutPrefix(name, "user:"); ok {
		return u, ""
	}
	r, _ := strings.CutPrefix(name, "room:")
	return "", r
}

// storedFrame is the frame of a stored event: the live frame's fields plus
// stream, offset and epoch, identical whether sent live, replayed or read
// over HTTP.
func storedFrame(ev stream.Event) []byte {
	user, room := streamTarget(ev.Stream)
	b, _ := marshal(Frame{
		Event: ev.Event, Room: room, To: user, From: ev.From, ID: ev.ID, Payload: ev.Payload,
		TS: ev.TS.UTC().Format(time.RFC3339Nano), Stream: ev.Stream, Offset: ev.Offset, Epoch: ev.Epoch,
	})
	return b
}
