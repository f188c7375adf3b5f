package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/switchboard/switchboard/infra/db"
)

// NodeStatus is one node in the cluster status.
type NodeStatus struct {
	ID             string    `json:"id" format:"uuid"`
	Name           string    `json:"name"`
	Addr           string    `json:"addr" doc:"host:port the other nodes reach it at"`
	Roles          []string  `json:"roles"`
	Version        string    `json:"version"`
	StartedAt      time.Time `json:"started_at"`
	HeartbeatAgeMS int64     `json:"heartbeat_age_ms"`
	Reachable      bool      `json:"reachable" doc:"answered within the 500 ms budget"`
	Draining       bool      `json:"draining" doc:"as the node says, or as last recorded when unreachable"`
	WSConnections  int       `json:"ws_connections" doc:"open sockets; 0 when unreachable"`
	JobsRunning    int       `json:"jobs_running" doc:"River jobs this node fetched last and still running"`
	Error          string    `json:"error,omitempty" doc:"why the node is unreachable"`
}

// Status is the whole cluster as one node sees it.
type Status struct {
	Nodes     []NodeStatus    `json:"nodes"`
	Queue     QueueCounts     `json:"queue"`
	Scheduler SchedulerStatus `json:"scheduler"`
	Degraded  bool            `json:"degraded" doc:"true when any node is unreachable"`
}

// nodes lists the registered nodes, with this one even when its row is
// missing (not yet registered, or reaped during a database outage).
func (c *Cluster) nodes(ctx context.Context) ([]Node, error) {
	nodes, err := nodeList(ctx, c.opts.DB)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(nodes, func(n Node) bool { return n.ID == c.opts.NodeID }) {
		nodes = append(nodes, c.self())
	}
	return nodes, nil
}

// Status asks every registered node for its local status (500 ms each,
// concurrently) and adds the queue and scheduler figures from the database.
// A node that does not answer is listed unreachable with worst-case values.
func (c *Cluster) Status(ctx context.Context) (Status, error) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return Status{}, err
	}
	var st Status
	var running map[string]int
	dbDone := make(chan error, 1)
	go func() {
		var err error
		if st.Queue, err = queueCounts(ctx, c.opts.DB); err == nil {
			if running, err = jobsRunningByNode(ctx, c.opts.DB); err == nil {
				st.Scheduler, err = schedulerBacklog(ctx, c.opts.DB)
			}
		}
		dbDone <- err
	}()
	answers := gather(ctx, c, nodes, GatherBudget, c.localStatus, func(ctx context.Context, n Node) (localStatus, error) {
		var ls localStatus
		err := c.call(ctx, "status", n, http.MethodGet, nodePath(n, "/status"), &ls)
		return ls, err
	})
	if err := <-dbDone; err != nil {
		return Status{}, err
	}
	st.Nodes = make([]NodeStatus, 0, len(answers))
	for _, a := range answers {
		ns := NodeStatus{ID: a.node.ID, Name: a.node.Name, Addr: a.node.Addr, Roles: a.node.Roles, Version: a.node.Version,
			StartedAt: a.node.StartedAt, HeartbeatAgeMS: a.node.HeartbeatAge.Milliseconds(), Reachable: a.err == nil,
			Draining: a.node.Draining, JobsRunning: running[a.node.ID]}
		if a.err == nil {
			ns.Draining, ns.WSConnections = a.val.Draining, a.val.WSConnections
		} else {
			ns.Error = a.err.Error()
			st.Degraded = true
		}
		st.Nodes = append(st.Nodes, ns)
	}
	return st, nil
}

// DisconnectResult says which nodes closed the user's sockets.
type DisconnectResult struct {
	Acked  []string `json:"acked" doc:"ids of the nodes that applied it"`
	Failed []string `json:"failed" doc:"ids of the nodes that did not answer"`
	Closed int      `json:"closed" doc:"sockets closed, over all nodes that acked"`
}

// DisconnectUser closes userID's sockets on every node.
func (c *Cluster) DisconnectUser(ctx context.Context, userID string) (DisconnectResult, error) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return DisconnectResult{}, err
	}
	answers := gather(ctx, c, nodes, ActionBudget,
		func() localDisconnect { return localDisconnect{Closed: c.opts.Sockets.DisconnectUserLocal(userID)} },
		func(ctx context.Context, n Node) (localDisconnect, error) {
			var ld localDisconnect
			err := c.call(ctx, "disconnect", n, http.MethodPost, nodePath(n, "/users/"+url.PathEscape(userID)+"/disconnect"), &ld)
			return ld, err
		})
	res := DisconnectResult{Acked: []string{}, Failed: []string{}}
	for _, a := range answers {
		if a.err != nil {
			c.logger.Warn("disconnect not applied on a node", "node", a.node.ID, "error", a.err)
			res.Failed = append(res.Failed, a.node.ID)
			continue
		}
		res.Acked = append(res.Acked, a.node.ID)
		res.Closed += a.val.Closed
	}
	return res, nil
}

// ErrUnknownNode is a node id that is not registered.
var ErrUnknownNode = errors.New("no such node")

// Drain tells node id to drain. It returns ErrUnknownNode or a *CallError
// when the node did not ack.
func (c *Cluster) Drain(ctx context.Context, id string) error {
	if id == c.opts.NodeID {
		c.DrainLocal(ctx)
		return nil
	}
	if IsInternal(ctx) {
		return &CallError{Node: id, Err: errors.New("not forwarded: an internal call is answered locally")}
	}
	n, err := nodeByID(ctx, c.opts.DB, id)
	if errors.Is(err, db.ErrNotFound) {
		return ErrUnknownNode
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ActionBudget)
	defer cancel()
	var ack drainAck
	if err := c.call(ctx, "drain", n, http.MethodPost, nodePath(n, "/drain"), &ack); err != nil {
		return err
	}
	if !ack.Acked {
		return &CallError{Node: id, Err: fmt.Errorf("the node did not ack")}
	}
	return nil
}

// PresenceUser is one user in a room, over every node.
type PresenceUser struct {
	UserID      string `json:"user_id"`
	Connections int    `json:"connections"`
}

// Presence is a room's members gathered from every node.
type Presence struct {
	Room             string         `json:"room"`
	Users            []PresenceUser `json:"users"`
	Degraded         bool           `json:"degraded" doc:"true when some node did not answer: its members are missing"`
	UnavailableNodes []string       `json:"unavailable_nodes" doc:"ids of the nodes that did not answer"`
}

// Presence gathers room's members from every node (500 ms each) and merges
// them by user.
func (c *Cluster) Presence(ctx context.Context, room string) (Presence, error) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return Presence{}, err
	}
	answers := gather(ctx, c, nodes, GatherBudget,
		func() localPresence { return localPresence{Users: c.roomMembersLocal(room)} },
		func(ctx context.Context, n Node) (localPresence, error) {
			var lp localPresence
			err := c.call(ctx, "presence", n, http.MethodGet, nodePath(n, "/presence?"+url.Values{"room": {room}}.Encode()), &lp)
			return lp, err
		})
	p := Presence{Room: room, Users: []PresenceUser{}, UnavailableNodes: []string{}}
	merged := map[string]int{}
	for _, a := range answers {
		if a.err != nil {
			p.Degraded = true
			p.UnavailableNodes = append(p.UnavailableNodes, a.node.ID)
			continue
		}
		for user, n := range a.val.Users {
			merged[user] += n
		}
	}
	for user, n := range merged {
		if n > 0 {
			p.Users = append(p.Users, PresenceUser{UserID: user, Connections: n})
		}
	}
	sort.Slice(p.Users, func(i, j int) bool { return p.Users[i].UserID < p.Users[j].UserID })
	return p, nil
}
