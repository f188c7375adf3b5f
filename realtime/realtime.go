// Package realtime owns WebSocket delivery: Melody hubs, rooms, the
// pg_notify bus between replicas, tickets, server-to-client RPC and presence.
//
// New builds one replica's realtime side, its parts wired to each other.
// A Hub holds this replica's sockets and indexes them by user and room. A
// Bus appends every stored event to its stream (realtime/stream) before it
// acknowledges it, delivers it to the local Hub at once and rings every
// other replica's doorbell through pg_notify on one channel; ephemeral
// events travel in the notification itself. Each socket delivers each
// stream's offsets once and in order, reading the store after a gap
// (follow.go, reads.go); clients resume from their offsets (resume.go). A
// PresenceTracker keeps the presence table equal to the hub's sockets'
// rooms (presence.go). The words coined here are in docs/glossary.md.
//
// Frames follow docs/api.md "Realtime":
// {"event","room"?,"to"?,"from"?,"id"?,"payload"?,"ts"?}; the server sets
// from and ts.
package realtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// Options configure New; zero values mean defaults.
type Options struct {
	// Bus configures the bus every replica has. The hub and the presence
	// tracker share its node id, pool, logger and metrics registry.
	Bus BusOptions
	// Hub configures the sockets of a replica that serves WebSockets. Nil
	// on a worker-only replica: its bus publishes (run events) and hears
	// the channels of BusOptions.Notices, but holds no socket.
	Hub *HubOptions
	// Presence configures the tracking of who is in which room across the
	// replicas, for the hub's sockets (ignored without Hub). Nil: not
	// tracked.
	Presence *PresenceOptions
}

// Realtime is one replica's realtime side as New builds it: the bus
// delivers to the hub, the hub publishes its clients' frames through the
// bus and tells the presence tracker of its sockets' joins and leaves, and
// the tracker reads their counts from the hub. Each part is started and
// stopped on its own (Bus and Presence are startstop services; Hub.Shutdown
// closes the sockets).
type Realtime struct {
	// Bus publishes to every replica; every replica has one.
	Bus *Bus
	// Hub holds this replica's sockets; nil without Options.Hub.
	Hub *Hub
	// Presence keeps the presence table equal to the hub's sockets' rooms;
	// its Stop ends whatever they still hold. Nil without Options.Hub and
	// Options.Presence.
	Presence *PresenceTracker
}

// New builds the bus and, with Options.Hub, the hub and (with
// Options.Presence) the presence tracker, each holding the others it
// needs. Nothing is started.
func New(opts Options) *Realtime {
	rt := &Realtime{Bus: NewBus(opts.Bus)}
	if opts.Hub == nil {
		return rt
	}
	logger := rt.Bus.opts.Logger
	rt.Hub = newHub(*opts.Hub, logger, opts.Bus.Registry)
	rt.Bus.hub, rt.Hub.bus = rt.Hub, rt.Bus
	if opts.Presence != nil {
		rt.Presence = newPresence(*opts.Presence, rt.Bus.opts.Pool, rt.Bus.opts.NodeID, &rt.Hub.sockets, logger)
		rt.Hub.presence = rt.Presence
	}
	return rt
}

// Event is one message for sockets: where it goes and what the frame says.
// To targets every connection of a user, Room every member of a room; with
// neither it goes to every connection everywhere.
type Event struct {
	Event   string          // name, e.g. "task.run.succeeded"
	To      string          // user id
	Room    string          // room name
	Project string          // project id: its run events' stream
	From    string          // sender's user id; empty for the server
	ID      string          // event id; Publish makes one when empty
	Payload json.RawMessage // any JSON value; empty for none
}

// Frame is the JSON object exchanged on a socket, both directions.
type Frame struct {
	Event   string          `json:"event"`
	Room    string          `json:"room,omitempty"`
	To      string          `json:"to,omitempty"`
	From    string          `json:"from,omitempty"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	TS      string          `json:"ts,omitempty"`
	// Stream, Offset and Epoch are set on stored events only: where the
	// event is in its stream's history (docs/api.md "Resume").
	Stream string `json:"stream,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	Epoch  string `json:"epoch,omitempty"`
}

// Server-sent event names.
const (
	EventError      = "error"
	EventDraining   = "server.draining"
	EventRoomJoined = "room.joined"
	EventRPCCall    = "rpc.call"
	// EventResumed ends the catch-up a resume (or a room.join with a
	// position) asked for: per stream, whether it was complete.
	EventResumed = "resumed"
)

// WebSocket close codes this package uses.
const (
	// CloseSlowConsumer: the client did not read fast enough and its send
	// queue (HubOptions.SendQueueBytes) overflowed (as Centrifugo's 3008);
	// reconnect and resume from the offsets received.
	CloseSlowConsumer = 3008
	// CloseDisconnected: an operator disconnected the user.
	CloseDisconnected = 4001
	// CloseGoingAway: the node shuts down; reconnect elsewhere.
	CloseGoingAway = 1001
)

// Errors callers map to answers.
var (
	ErrTicketInvalid = errors.New("the ticket is unknown, expired or already used; get a new one from POST /v1/ws/ticket")
	ErrDraining      = errors.New("this node is draining; reconnect to another")
	ErrOrigin        = errors.New("origin not allowed")
	ErrNotConnected  = errors.New("user not connected")
	ErrRPCTimeout    = errors.New("rpc timed out")
	ErrStopped       = errors.New("realtime bus stopped")
)

// encodeFrame renders an event as the frame every recipient gets, stamped
// with the server's time.
func encodeFrame(ev Event, now time.Time) ([]byte, error) {
	return marshal(Frame{
		Event: ev.Event, Room: ev.Room, To: ev.To, From: ev.From, ID: ev.ID,
		Payload: ev.Payload, TS: now.UTC().Format(time.RFC3339Nano),
	})
}

// marshal is json.Marshal without HTML escaping: payloads reach clients
// (and the 8000-byte NOTIFY limit) as they were sent, not inflated by \u003c.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
