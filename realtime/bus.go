package realtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/realtime/stream"
)

// Channel is the one NOTIFY channel every replica listens on.
const Channel = "switchboard_bus"

// maxNotifyBytes: Postgres refuses NOTIFY payloads of 8000 bytes or more
// (counted in bytes). Anything that large goes to bus_spill.
const maxNotifyBytes = 8000

// DefaultIdlePing is how long a LISTEN connection may hear nothing before
// it is pinged (a round trip; it must answer within 2 s). A connection
// that dies without a reset (a lost network) is found within about 12 s,
// and what was appended meanwhile is read once LISTEN is back (the
// streams' catch-up), so a longer wait delays, never loses; an idle
// replica pays one round trip per period for it.
const DefaultIdlePing = 10 * time.Second

// BusOptions configure a Bus; zero values mean defaults.
type BusOptions struct {
	Pool     *pgxpool.Pool
	NodeID   string
	Logger   *slog.Logger
	Registry prometheus.Registerer
	// ListenConfig is the dedicated LISTEN connection's configuration;
	// default: the pool's connection configuration.
	ListenConfig *pgx.ConnConfig
	// PollOnly: do not LISTEN (no session connection behind a
	// transaction-mode pooler); every PollInterval read the followed
	// streams and the messages other replicas wrote to bus_spill instead,
	// and write every message there too (poll.go).
	PollOnly bool
	// PollInterval of poll-only mode; default 1 s.
	PollInterval time.Duration
	// Notices are further NOTIFY channels the LISTEN connection hears,
	// each with what to call when a notification arrives on it, and also
	// when LISTEN is established or lost (one may have been missed: the
	// caller looks for itself). With notices the bus LISTENs on a replica
	// without a hub too (a worker-only one), on those channels only.
	// Poll-only, none is heard; Listening reports which.
	Notices map[string]func()
	// IdlePing: ping the LISTEN connection after this long without a
	// notification; default DefaultIdlePing.
	IdlePing time.Duration
	// FindUserTimeout bounds the wait for a node to answer "I hold user X"
	// before an RPC answers 404; default 1 s.
	FindUserTimeout time.Duration
	// QueueSize is how many events may wait for the publisher; default 10000.
	QueueSize int
	// MaxBatch is the most notifications sent in one round trip; default 500.
	MaxBatch int
	// Store is where stored events (docs/api.md "Streams") are appended
	// before Publish returns: Streams. Nil: every event is NOTIFY-only.
	Store appender
	// TracerProvider gives a Publish made in a traced context (an API
	// request, a job) a span; nil, tracing off, none.
	TracerProvider trace.TracerProvider
	// StopTimeout is the most Stop spends sending what is still queued,
	// however the database behaves (a hung one included); what is left
	// then is dropped and counted. Default 5 s.
	StopTimeout time.Duration
}

// localSockets is this replica's sockets as the bus hands them what it
// publishes and hears: the hub, in its three roles.
type localSockets interface {
	deliverer
	streamSink
	roomGuard
}

// deliverer takes the ephemeral frames of envelopes.
type deliverer interface {
	// deliver writes frame to the sockets of user, of room, or (neither) all.
	deliver(user, room string, frame []byte) int
	// deliverCall writes an rpc.call frame to user's sockets and remembers
	// which node waits for the answer.
	deliverCall(user, callID, node string, until time.Time, frame []byte)
	// hasRecipients reports whether an event for user, room or (neither)
	// everyone has a socket here.
	hasRecipients(user, room string) bool
}

// streamSink takes stored events; its sockets deliver each stream's
// offsets once and in order.
type streamSink interface {
	// offer delivers stored events (this replica's appends, doorbell
	// bodies) to the sockets that follow their streams.
	offer(evs []stream.Event)
	// behind: name was appended to up to last; followers behind read it.
	behind(name string, last int64)
	// catchUp reads every followed stream from its sockets' positions.
	catchUp()
}

// Bus delivers events to local sockets at once and to every other replica
// through pg_notify. Stored events are first appended to their stream
// (bus_streams.go) and NOTIFY only rings the other replicas' doorbell; a
// replica that missed it reads the stream (the hub's catch-up). Ephemeral
// events travel in the notification itself, at most once. One publisher
// goroutine sends whatever is pending in one round trip; one dedicated
// connection LISTENs.
type Bus struct {
	opts    BusOptions
	logger  *slog.Logger
	hub     localSockets // nil: no sockets here (NewBus); New sets it
	metrics busMetrics
	base    startstop.Base

	queue chan outgoing
	seq   atomic.Uint64

	appends     chan appendReq
	appendsDone chan struct{} // closed when the append loop exited

	listen listenState

	mu       sync.Mutex
	calls    map[string]chan json.RawMessage // rpc calls this node waits for
	searches map[string]chan struct{}        // "who holds user X?" questions this node asked
}

// envelope kinds (their wire values are kept across versions).
const (
	kindEvent     = "e" // a frame for a user, a room or everyone
	kindCall      = "c" // an rpc.call frame for a user; holders remember the caller
	kindResult    = "r" // an rpc result for the waiting node
	kindFindUser  = "w" // "who holds a socket of user X?"
	kindUserFound = "h" // "I do", to the asking node
)

// envelope is what travels between replicas. Spilled envelopes travel as a
// stub with the routing fields and Spill set; the body is in bus_spill.
type envelope struct {
	Origin string          `json:"o"`
	Seq    uint64          `json:"n"` // unique per node: Postgres folds identical payloads of one transaction
	Kind   string          `json:"k"`
	User   string          `json:"u,omitempty"`
	Room   string          `json:"r,omitempty"`
	Node   string          `json:"d,omitempty"` // destination node of kindResult and kindHere
	Call   string          `json:"c,omitempty"` // rpc call id or user search id
	Until  int64           `json:"t,omitempty"` // rpc deadline, Unix ms
	Frame  json.RawMessage `json:"f,omitempty"`
	Spill  string          `json:"s,omitempty"`
}

// outgoing is one notification ready to send, with its spilled body if any.
type outgoing struct {
	payload   string
	spillID   string
	spillBody []byte
	doorbell  bool // a stream doorbell of this node (stream.EncodeDoorbells)
}

// NewBus builds a bus with no sockets here, a worker-only replica's: it
// publishes (run events) and hears the channels of Notices, but does not
// LISTEN on Channel. New builds one with the hub it delivers to.
func NewBus(opts BusOptions) *Bus {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.IdlePing = cmp.Or(opts.IdlePing, DefaultIdlePing)
	opts.PollInterval = cmp.Or(opts.PollInterval, time.Second)
	if opts.PollOnly {
		// "Who holds user X?" and its answer each wait for a poll.
		opts.FindUserTimeout = max(opts.FindUserTimeout, 3*opts.PollInterval)
	}
	opts.FindUserTimeout = cmp.Or(opts.FindUserTimeout, time.Second)
	opts.StopTimeout = cmp.Or(opts.StopTimeout, 5*time.Second)
	opts.QueueSize = cmp.Or(opts.QueueSize, 10000)
	opts.MaxBatch = cmp.Or(opts.MaxBatch, 500)
	if opts.NodeID == "" {
		opts.NodeID = uuid.NewString()
	}
	if opts.ListenConfig == nil && opts.Pool != nil {
		opts.ListenConfig = opts.Pool.Config().ConnConfig.Copy()
	}
	b := &Bus{
		opts: opts, logger: opts.Logger.With("component", "bus"),
		queue: make(chan outgoing, opts.QueueSize), appends: make(chan appendReq, opts.QueueSize),
		appendsDone: make(chan struct{}),
		calls:       map[string]chan json.RawMessage{}, searches: map[string]chan struct{}{},
	}
	b.metrics = newBusMetrics(opts.Registry)
	return b
}

// NodeID is the id notifications from this node carry.
func (b *Bus) NodeID() string { return b.opts.NodeID }

// Start runs the publisher and, when the bus has a hub or notices, the
// LISTEN connection; with a hub it returns once LISTEN is established, or
// fails (and stops again) when ctx ends first. A second Start is refused
// (startstop.ErrStarted).
func (b *Bus) Start(ctx context.Context) error {
	runCtx, err := b.base.Begin(ctx)
	if err != nil {
		return fmt.Errorf("start bus: %w", err)
	}
	stopping := b.base.Stopping()
	b.base.Go(func() { b.appendLoop(b.giveUpAfterStop(stopping, b.appendsDone)) })
	b.base.Go(b.publishLoop)
	if b.hub == nil && (len(b.opts.Notices) == 0 || b.opts.PollOnly) {
		return nil
	}
	up := make(chan struct{})
	loop := b.listenLoop
	if b.opts.PollOnly {
		loop = b.pollLoop
	}
	b.base.Go(func() { loop(runCtx, up) })
	if b.hub == nil {
		// Only notices are heard here; until LISTEN is up their callers
		// poll (Listening), so a replica starts without waiting for it.
		return nil
	}
	select {
	case <-up:
		return nil
	case <-runCtx.Done():
		return nil // a Stop came first: started, and stopped already
	case <-ctx.Done():
		b.Stop() // a failed Start leaves nothing running
		return fmt.Errorf("start bus: LISTEN not established: %w", ctx.Err())
	}
}

// Stop ends the LISTEN connection, sends what is still queued (for at most
// StopTimeout) and returns once both goroutines exited. Publish fails with
// ErrStopped afterwards.
func (b *Bus) Stop() { b.base.Stop() }

// publish is Publish (tracing.go wraps it in a span).
func (b *Bus) publish(ctx context.Context, ev Event) error {
	if ev.To != "" && ev.Room != "" || ev.Project != "" && (ev.To != "" || ev.Room != "") {
		return errors.New("publish: an event targets a user, a room or a project, not two")
	}
	if ev.ID == "" {
		ev.ID = uuid.NewString()
	}
	if name := streamOf(ev); name != "" && b.opts.Store != nil {
		// The frame is written once stored (storedFrame); the store
		// refuses a payload that is not JSON (stream.ErrInvalid).
		if !utf8.Valid(ev.Payload) {
			return fmt.Errorf("publish %s: %w", ev.Event, ErrInvalidUTF8)
		}
		return b.publishStored(ctx, ev, name)
	}
	if ev.Project != "" {
		return fmt.Errorf("publish %s: a project's events are stored: the bus has no store", ev.Event)
	}
	frame, err := encodeFrame(ev, time.Now())
	if err != nil {
		return fmt.Errorf("publish %s: %w", ev.Event, err)
	}
	if !utf8.Valid(frame) {
		// Postgres refuses such NOTIFY text (the whole batch with it) and
		// browsers close a socket that receives it: refuse it here, once.
		return fmt.Errorf("publish %s: %w", ev.Event, ErrInvalidUTF8)
	}
	env := envelope{Kind: kindEvent, User: ev.To, Room: ev.Room, Frame: frame}
	b.dispatch(env)
	return b.send(ctx, env)
}

// ErrInvalidUTF8 is a payload that is not valid UTF-8 text: JSON strings
// must be, NOTIFY refuses it and browsers drop the socket over it.
var ErrInvalidUTF8 = errors.New("payload is not valid UTF-8")

// PublishUser sends event with payload (any JSON-encodable value) to every
// connection of userID on every replica. It implements workers.Publisher.
func (b *Bus) PublishUser(ctx context.Context, userID, event string, payload any) error {
	if userID == "" {
		return fmt.Errorf("publish %s: no user id", event)
	}
	raw, err := marshalPayload(payload)
	if err != nil {
		return fmt.Errorf("publish %s: %w", event, err)
	}
	return b.Publish(ctx, Event{Event: event, To: userID, Payload: raw})
}

// PublishProject stores event with payload in the project's stream, which
// the sockets of its members follow on every replica. It implements
// jobs.Publisher.
func (b *Bus) PublishProject(ctx context.Context, projectID, event string, payload any) error {
	if projectID == "" {
		return fmt.Errorf("publish %s: no project id", event)
	}
	raw, err := marshalPayload(payload)
	if err != nil {
		return fmt.Errorf("publish %s: %w", event, err)
	}
	return b.Publish(ctx, Event{Event: event, Project: projectID, Payload: raw})
}

// PublishRoom sends event with payload to every member of room on every
// replica. It implements workers.Publisher.
func (b *Bus) PublishRoom(ctx context.Context, room, event string, payload any) error {
	if room == "" {
		return fmt.Errorf("publish %s: no room", event)
	}
	raw, err := marshalPayload(payload)
	if err != nil {
		return fmt.Errorf("publish %s: %w", event, err)
	}
	return b.Publish(ctx, Event{Event: event, Room: room, Payload: raw})
}

func marshalPayload(payload any) (json.RawMessage, error) {
	switch p := payload.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return p, nil
	}
	return marshal(payload)
}

// send encodes env for the other replicas and queues it for the publisher.
func (b *Bus) send(ctx context.Context, env envelope) error {
	env.Origin, env.Seq = b.opts.NodeID, b.seq.Add(1)
	body, err := marshal(env)
	if err != nil {
		return fmt.Errorf("encode bus message: %w", err)
	}
	out := outgoing{payload: string(body)}
	// Poll-only replicas cannot LISTEN: they read every message from
	// bus_spill (poll.go).
	if len(body) >= maxNotifyBytes || b.opts.PollOnly {
		stub := envelope{Origin: env.Origin, Seq: env.Seq, Kind: env.Kind, User: env.User, Room: env.Room, Node: env.Node, Spill: uuid.NewString()}
		sb, _ := marshal(stub)
		out = outgoing{payload: string(sb), spillID: stub.Spill, spillBody: body}
	}
	stopping := b.base.Stopping()
	select {
	case <-stopping:
		return ErrStopped
	default:
	}
	select {
	case b.queue <- out:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("queue bus message: %w", ctx.Err())
	case <-stopping:
		return ErrStopped
	}
}

// dispatch acts on an envelope from this node or another one.
func (b *Bus) dispatch(env envelope) {
	switch env.Kind {
	case kindEvent:
		if b.hub != nil {
			b.hub.deliver(env.User, env.Room, env.Frame)
		}
	case kindCall:
		if b.hub != nil {
			b.hub.deliverCall(env.User, env.Call, cmp.Or(env.Origin, b.opts.NodeID), time.UnixMilli(env.Until), env.Frame)
		}
	case kindFindUser:
		if b.holdsUser(env.User) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = b.send(ctx, envelope{Kind: kindUserFound, Node: env.Origin, Call: env.Call})
			cancel()
		}
	case kindResult:
		b.resolveCall(env.Call, env.Frame)
	case kindUserFound:
		b.userFound(env.Call)
	}
}

// holdsUser reports whether a socket of user is open here.
func (b *Bus) holdsUser(user string) bool {
	return b.hub != nil && b.hub.hasRecipients(user, "")
}

// forThisNode reports whether a notification from another node concerns
// this one, before a spilled body is fetched.
func (b *Bus) forThisNode(env envelope) bool {
	switch env.Kind {
	case kindResult, kindUserFound:
		return env.Node == b.opts.NodeID
	case kindCall, kindFindUser:
		return b.holdsUser(env.User)
	case kindEvent:
		return b.hub != nil && b.hub.hasRecipients(env.User, env.Room)
	}
	return false
}
