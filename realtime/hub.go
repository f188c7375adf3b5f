package realtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/olahol/melody"
	"github.com/prometheus/client_golang/prometheus"
)

// HubOptions configure a Hub; zero values mean defaults.
// The hub logs and registers its metrics where the bus New builds it with
// does.
type HubOptions struct {
	// AllowedOrigins may open sockets from a browser, as scheme://host[:port];
	// "*" allows any. Empty: only the request's own host. Requests without an
	// Origin header (not from a browser) are always allowed.
	AllowedOrigins []string
	// MaxFrameBytes is the largest client frame; a larger one is answered
	// with an error event and the connection stays open. Default 64 KiB.
	// Frames over 4× this are refused by the transport (close 1009).
	MaxFrameBytes int64
	// SendQueueBytes bounds what may wait for a slow client, in bytes;
	// past it the connection is closed with 3008 (the client resumes from
	// its offsets). Default 1 MiB.
	SendQueueBytes int
	// SendBuffer is how many of those frames are handed to the socket's
	// writer at once; default 64.
	SendBuffer int
	// Store is where the sockets' streams are read from when they missed
	// events (a gap, a LISTEN outage, a resume): Streams. Nil: no
	// durability (frames are delivered as they come, gaps stay gaps).
	Store streamReader
	// MaxRooms one connection may join; default 100.
	MaxRooms int
	// WriteWait bounds a write to a client; default 10 s.
	WriteWait time.Duration
	// PingPeriod between server pings; a client silent for PingPeriod×10/9
	// is dropped. Default 54 s.
	PingPeriod time.Duration
	// Limits on the frames clients send and on sockets per user (limits.go).
	Limits FrameLimits
	// Rooms is asked before a socket joins a room (room_access.go): Rooms. Nil:
	// every room is open.
	Rooms RoomAccess
	// Projects tells which project streams a user's sockets follow
	// (project_access.go): Projects. Nil: none.
	Projects ProjectAccess
	// hold replaces holdNewSockets (tests).
	hold time.Duration
	// lingerBytes replaces the linger budget, lingerBytes (tests).
	lingerBytes int64
}

// Hub holds this replica's WebSocket sessions (Melody), indexed by user and
// room, and delivers frames to them. Its clients' frames go out through
// the bus New builds it with.
type Hub struct {
	opts    HubOptions
	origins origins
	m       *melody.Melody
	bus     relay
	logger  *slog.Logger
	metrics hubMetrics
	limits  *limiter

	presence presenceHook // nil: presence is not tracked (presence.go)

	sockets             // the index of clients (sockets.go); its mu guards them
	calls   callRecords // rpc calls delivered here (rpc.go)
	conns   sync.WaitGroup

	reads  reads // catch-up reads of streams (reads.go)
	ctx    context.Context
	cancel context.CancelFunc

	draining atomic.Bool
	// evictions counts room access notices applied (room_access.go).
	evictions atomic.Uint64
	hold      time.Duration // holdNewSockets; tests lengthen it
}

// client is one socket. It is indexed before the upgrade answers 101, so
// a client that sees its socket open misses nothing published after: frames
// for it wait in queue until Melody's session exists. Its rooms are
// guarded by the hub's sockets.mu, the rest by mu.
type client struct {
	id    string
	user  string
	rooms map[string]struct{}
	// projects whose streams the socket follows; guarded like rooms.
	projects map[string]struct{}
	closing  atomic.Bool
	limit    *connLimit

	mu       sync.Mutex
	s        *melody.Session
	queue    [][]byte // frames not yet handed to Melody (sendq.go)
	queued   int      // bytes in queue and in Melody's buffer
	inflight int      // frames in Melody's buffer
	overflow bool     // the queue overflowed before the session existed
	closeReq *closeCode
	follows  map[string]*follow // streams this socket follows (follow.go)
	paused   bool               // a follow's catch-up waits for the queue to drain
}

// Session keys set on every Melody session.
const (
	KeyUser   = "user_id"
	KeyConnID = "conn_id"
	KeyRooms  = "rooms"
	keyClient = "client"
)

// relay is how the hub's clients reach the other replicas: the bus.
type relay interface {
	// Publish delivers ev here and on every other replica.
	Publish(ctx context.Context, ev Event) error
	// routeResult sends a client's rpc result to the node waiting for it.
	routeResult(node, callID string, payload json.RawMessage)
}

// newHub builds a hub that logs to logger and registers its metrics with
// reg (nil: none). New gives it its bus and its presence tracker.
func newHub(opts HubOptions, logger *slog.Logger, reg prometheus.Registerer) *Hub {
	opts.MaxFrameBytes = cmp.Or(opts.MaxFrameBytes, 64<<10)
	opts.SendQueueBytes = cmp.Or(opts.SendQueueBytes, 1<<20)
	opts.SendBuffer = max(cmp.Or(opts.SendBuffer, 64), 2)
	opts.MaxRooms = cmp.Or(opts.MaxRooms, 100)
	opts.WriteWait = cmp.Or(opts.WriteWait, 10*time.Second)
	opts.PingPeriod = cmp.Or(opts.PingPeriod, 54*time.Second)
	opts.lingerBytes = cmp.Or(opts.lingerBytes, lingerBytes)
	h := &Hub{
		opts: opts, origins: newOrigins(opts.AllowedOrigins), logger: logger.With("component", "hub"),
		sockets: newSockets(),
		reads:   reads{due: map[string]int64{}}, hold: cmp.Or(opts.hold, holdNewSockets),
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.m = h.newMelody()
	h.metrics = newHubMetrics(reg, h)
	h.limits = newLimiter(opts.Limits, opts.MaxFrameBytes, reg)
	return h
}

func (h *Hub) newMelody() *melody.Melody {
	m := melody.New()
	m.Config.MaxMessageSize = 4 * h.opts.MaxFrameBytes
	m.Config.MessageBufferSize = h.opts.SendBuffer
	m.Config.WriteWait = h.opts.WriteWait
	m.Config.PingPeriod = h.opts.PingPeriod
	m.Config.PongWait = h.opts.PingPeriod * 10 / 9
	m.Upgrader.CheckOrigin = h.origins.allow
	// Memory per idle socket: read through the buffer net/http already holds
	// for the hijacked connection; write buffers only while writing.
	m.Upgrader.ReadBufferSize = 0
	m.Upgrader.WriteBufferSize = 4096
	m.Upgrader.WriteBufferPool = &sync.Pool{}
	m.HandleConnect(h.onConnect)
	m.HandleDisconnect(h.onDisconnect)
	m.HandleMessage(h.onFrame)
	m.HandleSentMessage(h.onSent)
	m.HandleMessageBinary(func(s *melody.Session, msg []byte) {
		if c := clientOf(s); c != nil && !c.closing.Load() && h.admitFrame(c, len(msg)) {
			h.sendError(c, "", "binary frames are not supported; send JSON text frames")
		}
	})
	m.HandleError(h.onError)
	return m
}

// Admit checks, before a ticket is spent, that r may become a socket here.
func (h *Hub) Admit(r *http.Request) error {
	if h.draining.Load() {
		return ErrDraining
	}
	if !h.origins.allow(r) {
		return ErrOrigin
	}
	if !websocket.IsWebSocketUpgrade(r) {
		return errors.New("not a WebSocket upgrade request; connect with a WebSocket client")
	}
	return nil
}

// Serve upgrades r to a socket of userID and serves it until it closes.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, userID string) error {
	h.mu.Lock()
	if h.closed || h.draining.Load() {
		h.mu.Unlock()
		return ErrDraining
	}
	h.conns.Add(1)
	h.mu.Unlock()
	defer h.conns.Done()
	limit, err := h.limits.addConn(userID)
	if err != nil {
		return err
	}
	defer h.limits.removeConn(userID)
	gen := h.evictions.Load()
	projects, heads, err := h.openingFollows(r.Context(), userID) // project_access.go
	if err != nil {
		return err
	}
	c := &client{id: uuid.NewString(), user: userID, rooms: map[string]struct{}{}, projects: projects, limit: limit, follows: map[string]*follow{}}
	h.add(c, heads)
	defer h.remove(c) // also when the upgrade fails
	h.recheckProjects(c, gen)
	return h.m.HandleRequestWithKeys(h.lingering(w, c), r, map[string]any{KeyUser: userID, KeyConnID: c.id, keyClient: c})
}

func (h *Hub) add(c *client, heads map[string]*position) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addLocked(c)
	h.followOpening(c, heads)
}

func (h *Hub) remove(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(c)
	for room := range c.rooms {
		h.presenceChanged(room, c.user)
	}
}

// origins are the browser origins that may open sockets
// (HubOptions.AllowedOrigins), lower case, without a trailing slash.
type origins struct {
	any    bool // "*" is listed
	listed map[string]bool
}

func newOrigins(list []string) origins {
	o := origins{listed: map[string]bool{}}
	for _, origin := range list {
		origin = strings.TrimRight(strings.ToLower(strings.TrimSpace(origin)), "/")
		o.any = o.any || origin == "*"
		o.listed[origin] = true
	}
	return o
}

// allow: no Origin (not a browser), "*", a listed origin, or by default
// the request's own host.
func (o origins) allow(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || o.any {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if len(o.listed) == 0 {
		return strings.EqualFold(u.Host, r.Host)
	}
	return o.listed[strings.ToLower(u.Scheme+"://"+u.Host)]
}

func clientOf(s *melody.Session) *client {
	v, _ := s.Get(keyClient)
	c, _ := v.(*client)
	return c
}

// onConnect gives the client its session and sends what waited for it.
func (h *Hub) onConnect(s *melody.Session) {
	c := clientOf(s)
	s.Set(KeyRooms, []string{})
	h.metrics.accepted.Inc()
	c.mu.Lock()
	c.s = s
	h.pumpLocked(c)
	overflow, req := c.overflow, c.closeReq
	time.AfterFunc(h.hold, func() { h.endHold(c) })
	c.mu.Unlock()
	h.mu.RLock()
	closed := h.closed
	h.mu.RUnlock()
	switch {
	case overflow:
		c.closing.Store(false)
		h.slowConsumer(c)
	case req != nil:
		go h.closeConn(c, req.code, req.text)
	case closed: // upgraded while Shutdown was closing the others
		_ = s.CloseWithMsg(websocket.FormatCloseMessage(CloseGoingAway, "server shutting down; reconnect"))
	}
}

func (h *Hub) onDisconnect(s *melody.Session) { h.remove(clientOf(s)) }

// session is c's Melody session, nil before the upgrade completes.
func (c *client) session() *melody.Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// onError: a full send buffer means a slow consumer; anything else is the
// connection ending, which Melody handles.
func (h *Hub) onError(s *melody.Session, err error) {
	if errors.Is(err, melody.ErrMessageBufferFull) {
		h.slowConsumer(clientOf(s))
		return
	}
	h.logger.Debug("websocket error", "error", err)
}

// deliver writes frame to the sockets of user, of room, or (neither) all.
func (h *Hub) deliver(user, room string, frame []byte) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	set := h.recipientsLocked(user, room)
	for c := range set {
		h.write(c, frame)
	}
	return len(set)
}
