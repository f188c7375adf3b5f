package realtime

import (
	"context"
	"time"

	"github.com/gorilla/websocket"
)

// How the hub closes sockets: a slow consumer (3008), an operator's
// disconnect (4001), drain and shutdown (1001). A close is graceful
// (linger.go), but for the sockets still open when a shutdown's time is up.

// closeCode is a close asked for before the socket's session existed;
// onConnect sends it.
type closeCode struct {
	code int
	text string
}

// slowConsumer closes a connection whose buffer overflowed, once: Melody
// would otherwise drop frames silently while the connection stays open.
func (h *Hub) slowConsumer(c *client) {
	if c == nil || !c.closing.CompareAndSwap(false, true) {
		return
	}
	h.metrics.slow.Inc()
	h.logger.Warn("closing slow websocket consumer", "user_id", c.user, "conn_id", c.id)
	go h.closeConn(c, CloseSlowConsumer, "slow consumer: frames were not read fast enough")
}

// closeConn closes through the underlying connection: a close queued
// behind a full buffer would be dropped. The client gets WriteWait to take
// the close frame, and a second to answer it, before the socket is cut.
func (h *Hub) closeConn(c *client, code int, text string) {
	c.mu.Lock()
	s := c.s
	if s == nil {
		c.closeReq = &closeCode{code, text} // onConnect closes it
	}
	c.mu.Unlock()
	if s == nil {
		return
	}
	conn := s.WebsocketConnection()
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(h.opts.WriteWait))
	answer := time.Second
	if code == CloseSlowConsumer { // it reads slowly: what is in flight before the close takes time
		answer = h.opts.WriteWait
	}
	time.AfterFunc(answer, func() { _ = conn.Close() })
}

// DisconnectUserLocal closes userID's sockets on this node only (close code
// 4001) and returns how many.
func (h *Hub) DisconnectUserLocal(userID string) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for c := range h.byUser[userID] {
		if c.closing.CompareAndSwap(false, true) {
			n++
			go h.closeConn(c, CloseDisconnected, "disconnected by an operator")
		}
	}
	return n
}

// DrainLocal sends server.draining to every socket here and refuses new
// upgrades from now on.
func (h *Hub) DrainLocal() {
	h.draining.Store(true)
	frame, _ := encodeFrame(Event{Event: EventDraining}, time.Now())
	h.deliver("", "", frame)
}

// Draining reports whether DrainLocal was called.
func (h *Hub) Draining() bool { return h.draining.Load() }

// Ready is ErrDraining once DrainLocal was called: the node takes no new
// sockets.
func (h *Hub) Ready(context.Context) error {
	if h.Draining() {
		return ErrDraining
	}
	return nil
}

// Shutdown drains (server.draining to every socket), closes every socket
// with 1001 after its queued frames, and waits for them until ctx ends; the
// stragglers are then cut.
func (h *Hub) Shutdown(ctx context.Context) {
	if !h.draining.Load() {
		h.DrainLocal()
	}
	h.mu.Lock()
	h.closed = true
	for c := range h.all {
		// Queued behind server.draining; a full buffer makes it a slow
		// consumer. A client still upgrading is closed by onConnect.
		if s := c.session(); s != nil {
			_ = s.CloseWithMsg(websocket.FormatCloseMessage(CloseGoingAway, "server shutting down; reconnect"))
		}
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		h.mu.RLock()
		for c := range h.all {
			if s := c.session(); s != nil {
				hardClose(s.WebsocketConnection().UnderlyingConn())
			}
		}
		h.mu.RUnlock()
		<-done
	}
	h.reads.mu.Lock()
	h.cancel() // under reads.mu: no read loop starts after this
	h.reads.mu.Unlock()
	h.reads.wg.Wait()
	_ = h.m.Close()
}
