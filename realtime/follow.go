package realtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/realtime/stream"
)

// A socket follows its user's stream from the moment it opens and a
// room's stream from its room.join. For each it remembers the last offset
// it delivered (and that offset's epoch): a stored event is written to the
// socket only when it is the next offset, so the application gets every
// event once and in order, whatever order replicas, doorbells and reads
// bring them in. An event past the next offset (a doorbell this replica
// missed, a range announced without bodies, two replicas' doorbells
// crossing) is not written: the stream is read from the store from the
// last delivered offset instead (reads.go), and the read's events go
// through the same rule.

// follow is a socket's position in one stream; guarded by client.mu.
type follow struct {
	epoch string
	// last offset delivered. A follow without a position starts at the
	// stream's head as read before the socket was indexed for it, and a
	// read from there follows at once: everything appended after the
	// socket opened (or joined) reaches it.
	last int64
	// start is where this socket's own deliveries began: offsets in
	// start+1..last were written to it.
	start int64
	// after: only reads taken after this one (reads.seq) may answer the
	// resume.
	after  uint64
	resume *resumeReq // a resume waiting for this stream's catch-up
	// paused: a read stopped at a full send queue; it goes on once the
	// queue has drained (onSent).
	paused bool
	// held: a new socket's user stream delivers nothing until the client's
	// first frame has been handled (or holdNewSockets passed), so that a
	// resume sent first positions it before any live event is written;
	// the end of the hold reads from the head, so nothing is lost meanwhile.
	held bool
	// checked: the resume's position was compared with the store.
	checked, recovered bool
}

// resumeReq is one resume frame (or positioned room.join): answered with
// one resumed frame once each of its streams has caught up.
type resumeReq struct {
	pending int
	streams map[string]resumedStream
}

type resumedStream struct {
	Recovered bool   `json:"recovered"`
	Epoch     string `json:"epoch"`
	Offset    int64  `json:"offset"`
}

// position is where a client says it is in a stream.
type position struct {
	Offset int64  `json:"offset"`
	Epoch  string `json:"epoch"`
}

// head reads a stream's epoch and last offset: where a follow without a
// position starts. Nil without a store.
func (h *Hub) head(ctx context.Context, name string) (*position, error) {
	if h.opts.Store == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hs, err := h.opts.Store.ReadMany(ctx, []stream.Cursor{{Stream: name, Since: headOnly}}, 1)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return &position{Epoch: hs[0].Epoch, Offset: hs[0].Last}, nil
}

// ErrUnavailable: the stream store could not be read; try again.
var ErrUnavailable = errors.New("the event store is unavailable; try again")

// followOpening starts c's follows of its user stream and its projects'
// streams, each at its head (read before c was indexed), held; the caller
// holds h.mu and has indexed c.
func (h *Hub) followOpening(c *client, heads map[string]*position) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, head := range heads {
		c.follows[name] = &follow{epoch: head.Epoch, last: head.Offset, start: head.Offset, held: true}
	}
}

// holdNewSockets is the longest a new socket's user stream waits for the
// client's first frame.
const holdNewSockets = time.Second

// endHold starts the held streams of c (its user's and its projects'):
// from where they were held, or from the position a resume gave them.
func (h *Hub) endHold(c *client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, f := range c.follows {
		if f.held {
			f.held = false
			h.requestRead(name, f.last)
		}
	}
}

// startFollowLocked follows name from head and reads what was appended
// between the head's read and now; the caller holds c.mu.
func (h *Hub) startFollowLocked(c *client, name string, head position) {
	c.follows[name] = &follow{epoch: head.Epoch, last: head.Offset, start: head.Offset}
	h.requestRead(name, head.Offset)
}

// followLocked starts (or repositions) c's follow of name: at pos, with
// req waiting for its catch-up, or (pos nil) at head unless it is
// followed already. The caller holds c.mu.
func (h *Hub) followLocked(c *client, name string, pos, head *position, req *resumeReq) {
	if h.opts.Store == nil {
		return
	}
	f := c.follows[name]
	switch {
	case f == nil && pos == nil:
		if head != nil {
			h.startFollowLocked(c, name, *head)
		}
		return
	case pos == nil:
		return // already followed: a second join changes nothing
	case f == nil:
		f = &follow{last: -1}
		c.follows[name] = f
	}
	h.finishResume(c, name, f) // a resume still waiting for this stream is superseded
	// On this socket, what was written arrives in order: a position among
	// the offsets written to it (frames in flight when the client sent it)
	// would only repeat them.
	if f.last < 0 || f.epoch != pos.Epoch || pos.Offset > f.last || pos.Offset < f.start {
		f.epoch, f.last, f.start = pos.Epoch, pos.Offset, pos.Offset
	}
	f.resume, f.checked, f.recovered, f.held = req, false, false, false
	req.pending++
	f.after = h.requestRead(name, f.last)
}

// unfollowLocked ends c's follow of name; the caller holds c.mu.
func (h *Hub) unfollowLocked(c *client, name string) {
	if f := c.follows[name]; f != nil {
		h.finishResume(c, name, f)
		delete(c.follows, name)
	}
}

// finishResume answers the resume waiting for f, if any, with f's current
// position; the caller holds c.mu.
func (h *Hub) finishResume(c *client, name string, f *follow) {
	req := f.resume
	if req == nil {
		return
	}
	f.resume = nil
	req.streams[name] = resumedStream{Recovered: f.checked && f.recovered, Epoch: f.epoch, Offset: max(f.last, 0)}
	h.resumeDoneLocked(c, req)
}

// newResume is a resume being registered: it is answered only once the
// registration ends (resumeRegistered) and every stream has caught up.
func newResume() *resumeReq {
	return &resumeReq{pending: 1, streams: map[string]resumedStream{}}
}

// resumeRegistered ends req's registration.
func (h *Hub) resumeRegistered(c *client, req *resumeReq) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.resumeDoneLocked(c, req)
}

// resumeDoneLocked counts one part of req done and answers it with the
// resumed frame after the last; the caller holds c.mu.
func (h *Hub) resumeDoneLocked(c *client, req *resumeReq) {
	if req.pending--; req.pending == 0 {
		payload, _ := marshal(map[string]any{"streams": req.streams})
		frame, _ := encodeFrame(Event{Event: EventResumed, Payload: payload}, time.Now())
		h.writeLocked(c, frame)
	}
}

// offer hands stored events (this replica's appends, a doorbell's bodies)
// to the sockets that follow their streams. Each run of consecutive events
// of one stream is offered under one lock of the hub and of each follower,
// its frames encoded only when someone here follows it.
func (h *Hub) offer(evs []stream.Event) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for len(evs) > 0 {
		n := 1
		for n < len(evs) && evs[n].Stream == evs[0].Stream {
			n++
		}
		run := evs[:n]
		evs = evs[n:]
		set := h.followersLocked(run[0].Stream)
		if len(set) == 0 {
			continue
		}
		frames := make([][]byte, len(run))
		for i, ev := range run {
			frames[i] = storedFrame(ev)
		}
		for c := range set {
			h.offerTo(c, run, frames)
		}
	}
}

// offerTo offers a run of one stream's events to c.
func (h *Hub) offerTo(c *client, run []stream.Event, frames [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ev := range run {
		if !h.offerLocked(c, ev, frames[i]) {
			return
		}
	}
}

// offerLocked writes ev to c if it is the next offset of its stream and
// reports whether later offsets of the run may follow; the caller holds
// c.mu.
func (h *Hub) offerLocked(c *client, ev stream.Event, frame []byte) bool {
	f := c.follows[ev.Stream]
	switch {
	case f == nil, f.held, f.paused: // not followed; or a read gives it later
		return false
	case f.epoch != "" && ev.Epoch != f.epoch:
		h.requestRead(ev.Stream, f.last) // reset, or a stale position: the store decides
		return false
	case ev.Offset <= f.last: // delivered already
		return true
	case ev.Offset == f.last+1 && !h.fits(c, frame):
		f.paused, c.paused = true, true // read once the socket has taken what is queued
		return false
	case ev.Offset == f.last+1:
		f.epoch, f.last = ev.Epoch, ev.Offset
		h.writeLocked(c, frame)
		return true
	}
	h.requestRead(ev.Stream, f.last)
	return false
}

// behind is a doorbell range without bodies: followers of name behind last
// read it.
func (h *Hub) behind(name string, last int64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for c := range h.followersLocked(name) {
		c.mu.Lock()
		if f := c.follows[name]; f != nil && !f.held && f.last < last {
			h.requestRead(name, f.last)
		}
		c.mu.Unlock()
	}
}

// catchUp reads every followed stream from its sockets' positions: after
// the LISTEN connection was (re)established, for what its outage missed.
func (h *Hub) catchUp() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for c := range h.all {
		c.mu.Lock()
		for name, f := range c.follows {
			h.requestRead(name, f.last)
		}
		c.mu.Unlock()
	}
}

// applyRead gives every follower of hist's stream what the read brought.
func (h *Hub) applyRead(hist stream.History, seq uint64) {
	frames := make([][]byte, len(hist.Events))
	for i, ev := range hist.Events {
		frames[i] = storedFrame(ev)
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for c := range h.followersLocked(hist.Stream) {
		h.applyReadTo(c, hist, seq, frames)
	}
}

func (h *Hub) applyReadTo(c *client, hist stream.History, seq uint64, frames [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.follows[hist.Stream]
	if f == nil || f.held {
		return
	}
	if f.resume != nil && !f.checked {
		if seq <= f.after {
			return // taken before the resume: the read it waits for is due
		}
		f.checked, f.recovered = true, hist.Recovered(f.epoch, f.last)
		if !f.recovered {
			reposition(f, hist)
		}
	}
	if f.epoch != hist.Epoch {
		if f.epoch != "" { // reset since: its new history from the start
			f.last = hist.Oldest - 1
		}
		f.epoch = hist.Epoch
	}
	for i, ev := range hist.Events {
		// A live follower whose position was pruned away skips to what is
		// retained; otherwise only the next offset is written.
		if ev.Offset <= f.last || (ev.Offset != f.last+1 && f.last >= hist.Oldest-1) {
			continue
		}
		if !h.fits(c, frames[i]) {
			// A stored event never makes a slow consumer: the rest waits
			// until the socket has taken what is queued.
			f.paused, c.paused = true, true
			return
		}
		f.last = ev.Offset
		h.writeLocked(c, frames[i])
	}
	if f.last < hist.Last {
		h.requestRead(hist.Stream, f.last)
		return
	}
	h.finishResume(c, hist.Stream, f)
}

// reposition moves a position the store cannot resume from (another
// epoch, older than retained history, beyond the head) to where it can:
// what is retained of the current epoch, or the head.
func reposition(f *follow, hist stream.History) {
	switch {
	case f.epoch == hist.Epoch && f.last > hist.Last:
		f.last = hist.Last
	case f.epoch == hist.Epoch:
		f.last = max(f.last, hist.Oldest-1)
	default:
		f.epoch, f.last = hist.Epoch, hist.Oldest-1
	}
}

// follows reports whether c follows name.
func (h *Hub) follows(c *client, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.follows[name] != nil
}
