package realtime

import "sync"

// sockets indexes this replica's clients: every one, by user, by room and
// by project (whose stream it follows). mu guards the maps, each client's
// rooms and projects and closed; the queries below take it themselves
// unless they say the caller holds it.
type sockets struct {
	mu        sync.RWMutex
	all       map[*client]struct{}
	byUser    map[string]map[*client]struct{}
	byRoom    map[string]map[*client]struct{}
	byProject map[string]map[*client]struct{}
	closed    bool // Shutdown began: no client is added any more
}

func newSockets() sockets {
	return sockets{all: map[*client]struct{}{}, byUser: map[string]map[*client]struct{}{},
		byRoom: map[string]map[*client]struct{}{}, byProject: map[string]map[*client]struct{}{}}
}

// addLocked indexes c under its user and its projects; the caller holds
// mu.
func (s *sockets) addLocked(c *client) {
	s.all[c] = struct{}{}
	addTo(s.byUser, c.user, c)
	for p := range c.projects {
		addTo(s.byProject, p, c)
	}
}

// leaveProjectLocked takes c out of project's index and reports whether it
// was in it; the caller holds mu.
func (s *sockets) leaveProjectLocked(c *client, project string) bool {
	if _, ok := c.projects[project]; !ok {
		return false
	}
	delete(c.projects, project)
	removeFrom(s.byProject, project, c)
	return true
}

// removeLocked takes c out of the index, its rooms too; the caller holds
// mu.
func (s *sockets) removeLocked(c *client) {
	delete(s.all, c)
	removeFrom(s.byUser, c.user, c)
	for room := range c.rooms {
		removeFrom(s.byRoom, room, c)
	}
	for p := range c.projects {
		removeFrom(s.byProject, p, c)
	}
}

// joinLocked puts c in room; the caller holds mu.
func (s *sockets) joinLocked(c *client, room string) {
	c.rooms[room] = struct{}{}
	addTo(s.byRoom, room, c)
}

// leaveLocked takes c out of room; the caller holds mu.
func (s *sockets) leaveLocked(c *client, room string) {
	delete(c.rooms, room)
	removeFrom(s.byRoom, room, c)
}

// recipientsLocked is the set of sockets of user, of room, or (neither)
// all; the caller holds mu.
func (s *sockets) recipientsLocked(user, room string) map[*client]struct{} {
	switch {
	case user != "":
		return s.byUser[user]
	case room != "":
		return s.byRoom[room]
	}
	return s.all
}

func addTo(idx map[string]map[*client]struct{}, key string, c *client) {
	set := idx[key]
	if set == nil {
		set = map[*client]struct{}{}
		idx[key] = set
	}
	set[c] = struct{}{}
}

func removeFrom(idx map[string]map[*client]struct{}, key string, c *client) {
	if set := idx[key]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(idx, key)
		}
	}
}

// hasRecipients reports whether an event for user, room or everyone has a
// recipient here.
func (s *sockets) hasRecipients(user, room string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.recipientsLocked(user, room)) > 0
}

// hasFollowers reports whether a socket here may follow the stream name.
func (s *sockets) hasFollowers(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.followersLocked(name)) > 0
}

// projectClients lists the sockets here that follow project's stream (of
// user, when given).
func (s *sockets) projectClients(project, user string) []*client {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*client
	for c := range s.byProject[project] {
		if user == "" || c.user == user {
			out = append(out, c)
		}
	}
	return out
}

// projectUsers maps each project with sockets here to its users with
// sockets here.
func (s *sockets) projectUsers() map[string][]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ask := map[string][]string{}
	for p, set := range s.byProject {
		seen := map[string]bool{}
		for c := range set {
			if !seen[c.user] {
				seen[c.user] = true
				ask[p] = append(ask[p], c.user)
			}
		}
	}
	return ask
}

// LocalConnections is the number of sockets open on this node.
func (s *sockets) LocalConnections() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.all)
}

// UserConnectionsLocal is the number of userID's sockets on this node.
func (s *sockets) UserConnectionsLocal(userID string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byUser[userID])
}

// RoomMembersLocal maps user id to connection count for room on this node.
func (s *sockets) RoomMembersLocal(room string) map[string]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]int{}
	for c := range s.byRoom[room] {
		out[c.user]++
	}
	return out
}

// followersLocked is the set of sockets that may follow name; the caller
// holds mu.
func (s *sockets) followersLocked(name string) map[*client]struct{} {
	if p := streamProject(name); p != "" {
		return s.byProject[p]
	}
	user, room := streamTarget(name)
	if user != "" {
		return s.byUser[user]
	}
	return s.byRoom[room]
}

// roomClients lists the sockets here in room (of user, when given).
func (s *sockets) roomClients(room, user string) []*client {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*client
	for c := range s.byRoom[room] {
		if user == "" || c.user == user {
			out = append(out, c)
		}
	}
	return out
}

// roomUsers maps each room (of rooms; all when nil) to the users with
// sockets here in it.
func (s *sockets) roomUsers(rooms map[string]bool) map[string][]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ask := map[string][]string{}
	for room, set := range s.byRoom {
		if rooms != nil && !rooms[room] {
			continue
		}
		seen := map[string]bool{}
		for c := range set {
			if !seen[c.user] {
				seen[c.user] = true
				ask[room] = append(ask[room], c.user)
			}
		}
	}
	return ask
}
