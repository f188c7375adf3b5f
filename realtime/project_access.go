package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/realtime/stream"
)

// Project streams. Every socket follows, from the moment it opens, the
// stream project:<id> of each project its user is a member of, exactly
// like its user stream (held until its first frame, resumable, read after
// a gap). A membership ended (removed, left, the project deleted)
// notifies every replica in the transaction that ends it (a trigger on
// project_members, migration 00016, sends {"k":"p","p","u","y"} on
// Channel); each replica then makes the user's sockets stop following the
// stream with a project.removed frame. As for rooms (room_access.go), a
// replica delivers its own project events through LISTEN, so an eviction
// is applied before the doorbell of any event committed after it; reads
// of project streams check their followers' membership in a snapshot
// taken after the read (guardReads); after LISTEN (re)connects every
// socket's projects are checked again; a socket that opened while an
// eviction was applied checks its projects once more after it was indexed.
// A membership added reaches sockets opened after it.

// ProjectAccess is what the hub asks about project membership: Projects.
type ProjectAccess interface {
	// UserProjects lists the projects user is a member of.
	UserProjects(ctx context.Context, user string) ([]string, error)
	// DeniedProjects returns, of the users asked about per project, those
	// who are not members of it now.
	DeniedProjects(ctx context.Context, ask map[string][]string) (map[string][]string, error)
}

// EventProjectRemoved tells a socket it no longer follows a project's
// stream; payload {"project","reason"} (reason removed or deleted).
const EventProjectRemoved = "project.removed"

// kindProjectEvict is the notification of a membership ended (wire value,
// written by the trigger).
const kindProjectEvict = "p"

type projectNotice struct {
	Project string `json:"p"`
	User    string `json:"u"`
	Reason  string `json:"y"`
}

// maxConnectProjects bounds the project streams one socket follows.
const maxConnectProjects = 1000

// Projects reads project membership in Postgres: the ProjectAccess of
// the hub.
type Projects struct{ DB db.DB }

// UserProjects implements ProjectAccess.
func (p Projects) UserProjects(ctx context.Context, user string) ([]string, error) {
	if uuid.Validate(user) != nil {
		return nil, nil
	}
	rows, err := p.DB.Query(ctx, `SELECT project_id::text FROM project_members WHERE user_id = $1 LIMIT $2`, user, maxConnectProjects)
	if err != nil {
		return nil, fmt.Errorf("read projects: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read projects: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// DeniedProjects implements ProjectAccess in one statement.
func (p Projects) DeniedProjects(ctx context.Context, ask map[string][]string) (map[string][]string, error) {
	var projects, users []string
	for project, us := range ask {
		for _, u := range us {
			projects, users = append(projects, project), append(users, u)
		}
	}
	rows, err := p.DB.Query(ctx, `
		SELECT a.p, a.u FROM unnest($1::text[], $2::text[]) AS a(p, u)
		WHERE NOT EXISTS (SELECT FROM project_members m WHERE m.project_id::text = a.p AND m.user_id::text = a.u)`, projects, users)
	if err != nil {
		return nil, fmt.Errorf("check project members: %w", err)
	}
	defer rows.Close()
	denied := map[string][]string{}
	for rows.Next() {
		var project, user string
		if err := rows.Scan(&project, &user); err != nil {
			return nil, fmt.Errorf("check project members: %w", err)
		}
		denied[project] = append(denied[project], user)
	}
	return denied, rows.Err()
}

// openingFollows reads what a new socket of user follows from the start:
// its projects, and the head of its user stream, of its inbox and of each
// project stream, read before the socket is indexed.
func (h *Hub) openingFollows(ctx context.Context, user string) (map[string]struct{}, map[string]*position, error) {
	projects := map[string]struct{}{}
	names := []string{}
	if name := stream.UserStream(user); stream.ValidateStream(name) == nil {
		names = append(names, name, stream.InboxStream(user))
	}
	if h.opts.Projects != nil && len(names) > 0 {
		ids, err := h.opts.Projects.UserProjects(ctx, user)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		for _, id := range ids {
			projects[id] = struct{}{}
			names = append(names, stream.ProjectStream(id))
		}
	}
	heads, err := h.heads(ctx, names)
	return projects, heads, err
}

// heads reads the epoch and last offset of each stream, nil without a
// store.
func (h *Hub) heads(ctx context.Context, names []string) (map[string]*position, error) {
	if h.opts.Store == nil || len(names) == 0 {
		return nil, nil
	}
	cursors := make([]stream.Cursor, len(names))
	for i, name := range names {
		cursors[i] = stream.Cursor{Stream: name, Since: headOnly}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hs, err := h.opts.Store.ReadMany(ctx, cursors, 1)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	out := make(map[string]*position, len(hs))
	for _, hist := range hs {
		out[hist.Stream] = &position{Epoch: hist.Epoch, Offset: hist.Last}
	}
	return out, nil
}

// recheckProjects checks c's projects once more after it was indexed when
// an eviction was applied since gen: the eviction may have looked for c's
// sockets before c was indexed.
func (h *Hub) recheckProjects(c *client, gen uint64) {
	if h.opts.Projects == nil || h.evictions.Load() == gen {
		return
	}
	h.mu.RLock()
	ask := map[string][]string{}
	for p := range c.projects {
		ask[p] = []string{c.user}
	}
	h.mu.RUnlock()
	h.evictDeniedProjects(h.ctx, ask)
}

// resumeProject positions c's follow of project's stream for a resume;
// a project whose stream c does not follow (not a member, or no longer)
// is answered with project.removed, so the client stops resuming it.
func (h *Hub) resumeProject(c *client, project string, pos *position, req *resumeReq) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.projects[project]; !ok {
		h.writeLocked(c, projectRemovedFrame(project, ReasonRemoved))
		return
	}
	h.followLocked(c, stream.ProjectStream(project), pos, nil, req)
}

func projectRemovedFrame(project, reason string) []byte {
	payload, _ := marshal(map[string]string{"project": project, "reason": reason})
	frame, _ := encodeFrame(Event{Event: EventProjectRemoved, Payload: payload}, time.Now())
	return frame
}

// evictProject makes c stop following project's stream and tells it why;
// nothing if it did not follow it.
func (h *Hub) evictProject(c *client, project, reason string) {
	h.mu.Lock()
	left := h.leaveProjectLocked(c, project)
	h.mu.Unlock()
	if !left {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h.unfollowLocked(c, stream.ProjectStream(project))
	h.writeLocked(c, projectRemovedFrame(project, reason))
}

// evictDeniedProjects checks the membership of the users asked about per
// project and evicts the sockets of those denied. On a database error the
// check is retried every second until it succeeds (or the hub stops).
func (h *Hub) evictDeniedProjects(ctx context.Context, ask map[string][]string) {
	for len(ask) > 0 {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		denied, err := h.opts.Projects.DeniedProjects(qctx, ask)
		cancel()
		if err == nil {
			h.evictProjectUsers(denied, ReasonRemoved)
			return
		}
		h.logger.Warn("project membership not checked; retrying", "projects", len(ask), "error", err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		}
	}
}

func (h *Hub) evictProjectUsers(denied map[string][]string, reason string) {
	for project, users := range denied {
		for _, u := range users {
			for _, c := range h.projectClients(project, u) {
				h.evictProject(c, project, reason)
			}
		}
	}
}

// revalidateProjects checks every socket's projects again: after LISTEN
// (re)connected, notices may have been missed.
func (h *Hub) revalidateProjects(ctx context.Context) {
	if h.opts.Projects != nil {
		h.evictDeniedProjects(ctx, h.projectUsers())
	}
}

// guardProjectReads evicts, before a read's events are written, the
// followers of its project streams who are not members now.
func (h *Hub) guardProjectReads(hs []stream.History) error {
	if h.opts.Projects == nil {
		return nil
	}
	ask := map[string][]string{}
	for _, hist := range hs {
		if p := streamProject(hist.Stream); p != "" && len(hist.Events) > 0 {
			for _, c := range h.projectClients(p, "") {
				ask[p] = append(ask[p], c.user)
			}
		}
	}
	if len(ask) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	denied, err := h.opts.Projects.DeniedProjects(ctx, ask)
	if err != nil {
		return err
	}
	h.evictProjectUsers(denied, ReasonRemoved)
	return nil
}

// applyProjectNotice applies a membership-ended notice to the sockets here.
func (h *Hub) applyProjectNotice(n projectNotice) {
	h.evictions.Add(1)
	for _, c := range h.projectClients(n.Project, n.User) {
		h.evictProject(c, n.Project, n.Reason)
	}
}

// receiveProjectEvict applies a membership-ended notice.
func (b *Bus) receiveProjectEvict(payload string) {
	var n projectNotice
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.Project == "" {
		b.logger.Warn("bus: unreadable project notice", "error", err)
		return
	}
	b.metrics.received.Inc()
	if b.hub != nil {
		b.hub.applyProjectNotice(n)
	}
}

// guarded reports whether access to the stream name is checked here: then
// this replica's own appends to it reach its sockets through LISTEN,
// ordered after evictions.
func (h *Hub) guarded(name string) bool {
	if streamProject(name) != "" {
		return h.opts.Projects != nil
	}
	_, room := streamTarget(name)
	return room != "" && h.opts.Rooms != nil
}
