package realtime

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// lingerBytes bounds what a closing socket still reads and discards.
const lingerBytes = 16 << 20

// lingerWriter hands the WebSocket upgrader a connection that closes
// gracefully (lingerConn).
type lingerWriter struct {
	http.ResponseWriter
	wrap func(net.Conn) net.Conn
}

func (w lingerWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response does not implement http.Hijacker")
	}
	conn, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	return w.wrap(conn), brw, nil
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w lingerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// lingerConn makes the first Close a lingering close: the write side is
// shut (after the close frame, the client reads everything sent so far and
// then EOF) while what the client still sends — the rest of an oversized
// frame, frames sent before it saw the close — is read and discarded for up
// to linger (past lingerBytes it is left unread until then). Closing at
// once instead makes the kernel answer those bytes with a reset, and most
// clients then report 1006 without reading the close frame that was
// already on its way. A second Close closes at once.
type lingerConn struct {
	net.Conn
	linger  time.Duration
	budget  int64 // bytes read and discarded at most
	onClose func()
	closes  atomic.Int32
}

func (c *lingerConn) Close() error {
	if c.closes.Add(1) > 1 {
		return c.Conn.Close()
	}
	if c.onClose != nil {
		c.onClose()
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return c.Conn.Close()
	}
	timer := time.AfterFunc(c.linger, func() { _ = c.Conn.Close() })
	go func() {
		if _, err := io.CopyN(io.Discard, c.Conn, c.budget); err == nil {
			// The budget is spent but the client still sends: stop reading
			// and let its writes stall on a full window until the timer
			// closes. Closing now would reset the close frame away.
			return
		}
		timer.Stop()
		_ = c.Conn.Close()
	}()
	return nil
}

// lingering wraps w so that c's connection closes gracefully; from the
// moment it starts closing, c's frames are ignored.
func (h *Hub) lingering(w http.ResponseWriter, c *client) http.ResponseWriter {
	return lingerWriter{ResponseWriter: w, wrap: func(conn net.Conn) net.Conn {
		return &lingerConn{Conn: conn, linger: h.opts.WriteWait, budget: h.opts.lingerBytes, onClose: func() { c.closing.Store(true) }}
	}}
}

// hardClose closes conn at once, without lingering: for stragglers when
// the time to shut down is up.
func hardClose(conn net.Conn) {
	if lc, ok := conn.(*lingerConn); ok {
		lc.closes.Add(1)
	}
	_ = conn.Close()
}
