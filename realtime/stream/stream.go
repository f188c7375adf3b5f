// Package stream owns durable event streams in Postgres: two per user (its
// own and system events, and its inbox of other users' messages), one per
// room and one per project, each an ordered history of the events clients
// may need again.
// Append stores a batch of events for many streams in one round trip and
// numbers them per stream in commit order with no gaps; Read and ReadMany
// return what a reconnecting client or a replica behind its LISTEN missed,
// with the stream's epoch and oldest retained offset so the caller can say
// whether recovery was complete; Prune applies retention; Doorbell is the
// small NOTIFY payload that tells replicas what was appended.
//
// The design and its guarantees are in docs/realtime.md ("Stream storage").
package stream

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Stream name prefixes.
const (
	userPrefix    = "user:"
	inboxPrefix   = "inbox:"
	roomPrefix    = "room:"
	projectPrefix = "project:"
)

// MaxStreamBytes bounds a stream name: "room:" and a 128-byte room name fit.
const MaxStreamBytes = 256

// UserStream is the stream of what is addressed to one user by the user
// itself or by the server.
func UserStream(userID string) string { return userPrefix + userID }

// InboxStream is the stream of what other users address to one user: its
// retention is its own, so their messages never push the user's own and
// system events out of UserStream.
func InboxStream(userID string) string { return inboxPrefix + userID }

// RoomStream is the stream of one room.
func RoomStream(room string) string { return roomPrefix + room }

// ProjectStream is the stream of one project's run events.
func ProjectStream(projectID string) string { return projectPrefix + projectID }

// ErrInvalid is an event or a stream name this package refuses to store.
var ErrInvalid = errors.New("invalid")

// Event is one stored event. Append reads Stream, Event, ID, From, Payload
// and TS; Read fills every field.
type Event struct {
	Stream string
	Offset int64  // position in the stream, from 1; set by the store
	Epoch  string // the stream's history this offset belongs to; set by the store
	Event  string // name, e.g. "dm"
	ID     string // event id (a UUID) or empty
	From   string // sender's user id (a UUID); empty for the server
	// Payload is JSON or empty. Append stores it compacted, so what Read
	// returns is byte-identical to what a doorbell carries.
	Payload []byte
	// TS is when the event happened, to the microsecond; zero on Append
	// means the database's clock at the append.
	TS time.Time
}

// Position is where an appended event was stored.
type Position struct {
	Stream string
	Epoch  string
	Offset int64
	TS     time.Time
}

// ValidateStream checks a stream name: "user:<uuid>", "inbox:<uuid>",
// "project:<uuid>" or "room:<name>", valid UTF-8 without NUL bytes, at most
// MaxStreamBytes.
func ValidateStream(s string) error {
	switch {
	case len(s) > MaxStreamBytes:
		return fmt.Errorf("%w: stream name is %d bytes; the limit is %d", ErrInvalid, len(s), MaxStreamBytes)
	case !validText(s):
		return fmt.Errorf("%w: stream name is not valid UTF-8 text", ErrInvalid)
	case strings.HasPrefix(s, userPrefix):
		if _, err := uuid.Parse(s[len(userPrefix):]); err != nil {
			return fmt.Errorf("%w: stream %q: a user stream is user:<uuid>", ErrInvalid, s)
		}
		return nil
	case strings.HasPrefix(s, inboxPrefix):
		if _, err := uuid.Parse(s[len(inboxPrefix):]); err != nil {
			return fmt.Errorf("%w: stream %q: an inbox stream is inbox:<uuid>", ErrInvalid, s)
		}
		return nil
	case strings.HasPrefix(s, projectPrefix):
		if _, err := uuid.Parse(s[len(projectPrefix):]); err != nil {
			return fmt.Errorf("%w: stream %q: a project stream is project:<uuid>", ErrInvalid, s)
		}
		return nil
	case strings.HasPrefix(s, roomPrefix) && len(s) > len(roomPrefix):
		return nil
	}
	return fmt.Errorf("%w: stream %q is neither user:<uuid>, inbox:<uuid>, project:<uuid> nor room:<name>", ErrInvalid, s)
}

// validText is what a Postgres text column accepts: UTF-8 without NUL.
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
