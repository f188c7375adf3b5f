package realtime

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/switchboard/switchboard/infra/names"
	"github.com/switchboard/switchboard/realtime/stream"
)

// resume handles {"event":"resume","payload":{"streams":{"<stream>":
// {"offset","epoch"}}}}: each stream is caught up from its position (a
// room stream joins the room first), then one resumed frame answers.
func (h *Hub) resume(c *client, payload json.RawMessage) error {
	var p struct {
		Streams map[string]position `json:"streams"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Streams == nil {
		return fmt.Errorf(`resume payload must be {"streams":{"<stream>":{"offset":<int>,"epoch":"<epoch>"}}}`)
	}
	if most := h.opts.MaxRooms + 2 + maxConnectProjects; len(p.Streams) > most {
		return fmt.Errorf("resume names %d streams; at most %d (the user's, its inbox, one per room and one per project)", len(p.Streams), most)
	}
	names := slices.Sorted(maps.Keys(p.Streams))
	for _, name := range names {
		if err := h.checkResumable(c, name, p.Streams[name]); err != nil {
			return err // nothing resumed: the client fixes its frame
		}
	}
	gen := h.evictions.Load()
	forbidden, err := h.resumeAccess(c, names) // room_access.go
	if err != nil {
		return err
	}
	req := newResume()
	defer h.resumeRegistered(c, req)
	for _, name := range names {
		pos := p.Streams[name]
		if project := streamProject(name); project != "" {
			h.resumeProject(c, project, &pos, req) // project_access.go
			continue
		}
		if _, room := streamTarget(name); room != "" {
			if forbidden[room] {
				h.refuseRoom(c, room)
				continue
			}
			if err := h.joinFollow(c, room, &pos, nil, req); err != nil {
				return err
			}
			h.recheckJoin(c, room, gen)
			continue
		}
		c.mu.Lock()
		h.followLocked(c, ownStream(c, name), &pos, nil, req)
		c.mu.Unlock()
	}
	h.resumedUnnamed(c, names, req)
	return nil
}

// resumedUnnamed adds to req's answer every stream c follows that the
// resume did not name (its user stream and inbox, its projects', a room's
// joined before) with the position its deliveries on this socket start
// from: a client that had no position in such a stream learns one at once,
// so a later resume after a drop brings what arrived meanwhile. (Frames
// after that position may reach the client before the answer; it keeps
// the later position.)
func (h *Hub) resumedUnnamed(c *client, names []string, req *resumeReq) {
	named := make(map[string]bool, len(names))
	for _, name := range names {
		if strings.HasPrefix(name, "user:") || strings.HasPrefix(name, "inbox:") {
			name = ownStream(c, name) // the canonical spelling of the user's id
		}
		named[name] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, f := range c.follows {
		if !named[name] {
			req.streams[name] = resumedStream{Recovered: true, Epoch: f.epoch, Offset: max(f.start, 0)}
		}
	}
}

// checkResumable: the user's own stream or inbox, a project's
// (resumeProject checks the membership), or a room's.
func (h *Hub) checkResumable(c *client, name string, pos position) error {
	if pos.Offset < 0 {
		return fmt.Errorf("resume %q: offset %d is negative", name, pos.Offset)
	}
	if err := stream.ValidateStream(name); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	for _, prefix := range []string{"user:", "inbox:"} {
		if user, ok := strings.CutPrefix(name, prefix); ok {
			if id, err := NormalizeUserID(user); err != nil || id != c.user {
				return fmt.Errorf("resume %q: a connection follows only its own %s stream, %s%s", name, strings.TrimSuffix(prefix, ":"), prefix, c.user)
			}
			return nil
		}
	}
	if streamProject(name) != "" {
		return nil
	}
	_, room := streamTarget(name)
	return names.Room(room)
}

// ownStream is the canonical name of c's user stream or inbox, whichever
// name (checked by checkResumable) is.
func ownStream(c *client, name string) string {
	if strings.HasPrefix(name, "inbox:") {
		return stream.InboxStream(c.user)
	}
	return stream.UserStream(c.user)
}
