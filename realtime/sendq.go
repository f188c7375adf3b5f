package realtime

import "github.com/olahol/melody"

// A client's send queue is bounded in bytes, not frames: frames wait in
// c.queue until Melody's buffer (SendBuffer frames) has room, and
// c.queued counts the bytes of both. A stored event that does not fit is
// not queued: its stream pauses and is read from the store once the queue
// has drained to half (follow.go), so a slow reader gets every stored
// event at the pace it reads. Any other frame that does not fit makes the
// client a slow consumer: it is closed with 3008 and resumes from its
// offsets on its next connection. A frame always fits into an empty queue,
// whatever its size.

// fits reports whether frame fits into c's queue; the caller holds c.mu.
func (h *Hub) fits(c *client, frame []byte) bool {
	return c.queued == 0 || c.queued+len(frame) <= h.opts.SendQueueBytes
}

// write queues frame for c.
func (h *Hub) write(c *client, frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.writeLocked(c, frame)
}

// writeLocked queues frame for c; the caller holds c.mu.
func (h *Hub) writeLocked(c *client, frame []byte) {
	if c.closing.Load() {
		return
	}
	if !h.fits(c, frame) {
		c.queue, c.queued = nil, 0
		if c.s == nil { // a slow consumer from the start: onConnect closes it
			c.overflow = true
			c.closing.Store(true)
			return
		}
		h.slowConsumer(c)
		return
	}
	c.queued += len(frame)
	c.queue = append(c.queue, frame)
	h.pumpLocked(c)
}

// pumpLocked moves queued frames into Melody's buffer while it has room,
// keeping one slot free for a close frame; the caller holds c.mu.
func (h *Hub) pumpLocked(c *client) {
	if c.s == nil {
		return
	}
	for len(c.queue) > 0 && c.inflight < h.opts.SendBuffer-1 {
		frame := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.inflight++
		_ = c.s.Write(frame)
	}
	if len(c.queue) == 0 {
		c.queue = nil // free the backing array
	}
}

// onSent: Melody wrote a text frame to c's socket.
func (h *Hub) onSent(s *melody.Session, msg []byte) {
	c := clientOf(s)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	c.queued = max(0, c.queued-len(msg))
	h.pumpLocked(c)
	if c.paused && c.queued <= h.opts.SendQueueBytes/2 {
		c.paused = false
		for name, f := range c.follows {
			if f.paused {
				f.paused = false
				h.requestRead(name, f.last)
			}
		}
	}
}
