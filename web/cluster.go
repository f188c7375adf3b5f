package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/names"
	"github.com/switchboard/switchboard/realtime"
)

// clusterOperator is the cluster as the operator routes use it: every node
// asked or told from whichever node the request reached.
type clusterOperator interface {
	Status(ctx context.Context) (cluster.Status, error)
	FanOut(ctx context.Context, action, arg string) (cluster.FanOutResult, error)
	Drain(ctx context.Context, nodeID string) error
	ReadyCheck(ctx context.Context) error // nil unless draining
	Handler() http.Handler                // the node-to-node routes
}

// presenceReader reads who is in a room over every node: the state
// presence.join and presence.leave announce the changes of.
type presenceReader interface {
	RoomPresence(ctx context.Context, room string) (realtime.Presence, error)
}

type clusterStatusOutput struct {
	Body cluster.Status
}

type userIDInput struct {
	IDPath
}

// ActionDisconnectUser is the fan-out action behind
// POST /v1/admin/users/{id}/disconnect: each node closes the user's sockets
// and counts them (cmd registers the hub's DisconnectUserLocal under it).
const ActionDisconnectUser = "disconnect_user"

// DisconnectResult says which nodes closed the user's sockets.
type DisconnectResult struct {
	Acked  []string `json:"acked" doc:"ids of the nodes that applied it"`
	Failed []string `json:"failed" doc:"ids of the nodes that did not answer"`
	Closed int      `json:"closed" doc:"sockets closed, over all nodes that acked"`
}

type disconnectOutput struct {
	Body DisconnectResult
}

type nodeIDInput struct {
	IDPath // a node id, as GET /v1/cluster/status lists it
}

type drainOutput struct {
	Body struct {
		Acked bool `json:"acked"`
	}
}

type presenceInput struct {
	Room string `query:"room" required:"true" minLength:"1" maxLength:"128" doc:"room name"`
}

type presenceOutput struct {
	Body realtime.Presence
}

const adminOnly = "this route needs the admin role"

func registerCluster(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "cluster-status", Method: http.MethodGet, Path: "/v1/cluster/status",
		Summary:     "Every node, the queue and the scheduler backlog, from any node",
		Description: "Asks every registered node concurrently (500 ms each); a node that does not answer is listed with reachable false and the answer is degraded.",
		Tags:        []string{"Cluster"}, Security: bearer, Errors: []int{http.StatusUnauthorized, http.StatusForbidden},
	}, s.clusterStatus)
	huma.Register(api, huma.Operation{
		OperationID: "admin-disconnect-user", Method: http.MethodPost, Path: "/v1/admin/users/{id}/disconnect",
		Summary: "Close a user's sockets on every node", Tags: []string{"Cluster"},
		Description: "Asks every live node to close the user's WebSockets; the answer names the nodes that did and those that did not answer.",
		Security:    bearer, Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity},
	}, s.disconnectUser)
	huma.Register(api, huma.Operation{
		OperationID: "admin-drain-node", Method: http.MethodPost, Path: "/v1/admin/nodes/{id}/drain",
		Summary:     "Drain a node: no new tasks, jobs or sockets, readiness fails; it keeps running",
		Description: "Asks the node to drain: it stops claiming ticks and jobs and refuses new sockets, and its readiness fails so load balancers move on. 404 for an unknown node.",
		Tags:        []string{"Cluster"}, Security: bearer,
		Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusBadGateway, http.StatusGatewayTimeout},
	}, s.drainNode)
}

func registerPresence(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "presence", Method: http.MethodGet, Path: "/v1/presence",
		Summary:     "Who is in a room, over every node",
		Description: "Read from the presence state every node keeps in the database, the same state presence.join and presence.leave announce the changes of. Members held by a node that stopped heartbeating are still listed until the node is judged dead; such nodes are named in unavailable_nodes and the answer is degraded. An open room: any signed-in user; a members-only room: its members and admins only (403, before anything is read).",
		Tags:        []string{"Realtime"}, Security: bearer,
		Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity},
	}, s.presence)
}

// The operator routes below are reached by admins only: requireAdmin
// answers 403 on /v1/admin/* and /v1/cluster/* before anything else.
func (s *Server) clusterStatus(ctx context.Context, _ *struct{}) (*clusterStatusOutput, error) {
	st, err := s.opts.Cluster.Status(ctx)
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	return &clusterStatusOutput{Body: st}, nil
}

func (s *Server) disconnectUser(ctx context.Context, in *userIDInput) (*disconnectOutput, error) {
	res, err := s.opts.Cluster.FanOut(ctx, ActionDisconnectUser, in.ID)
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	return &disconnectOutput{Body: DisconnectResult{Acked: res.Acked, Failed: res.Failed, Closed: res.Affected}}, nil
}

func (s *Server) drainNode(ctx context.Context, in *nodeIDInput) (*drainOutput, error) {
	err := s.opts.Cluster.Drain(ctx, in.ID)
	var ce *cluster.CallError
	switch {
	case errors.Is(err, cluster.ErrUnknownNode):
		return nil, huma.Error404NotFound("no node " + in.ID + " is registered; GET /v1/cluster/status lists the nodes")
	case errors.As(err, &ce) && ce.Timeout:
		return nil, huma.Error504GatewayTimeout("the node did not answer in time; it may be down: " + ce.Error())
	case errors.As(err, &ce):
		return nil, huma.Error502BadGateway("the node could not be reached: " + ce.Error())
	case err != nil:
		return nil, s.fail(ctx, err, "", "")
	}
	out := &drainOutput{}
	out.Body.Acked = true
	return out, nil
}

func (s *Server) presence(ctx context.Context, in *presenceInput) (*presenceOutput, error) {
	// Everything that can be refused is, first: the name, then access to a
	// members-only room (rooms.go), before anything is read.
	if err := names.Room(in.Room); err != nil {
		return nil, huma.Error422UnprocessableEntity(err.Error())
	}
	if err := s.requireRoomUse(ctx, in.Room); err != nil {
		return nil, err
	}
	p, err := s.opts.Presence.RoomPresence(ctx, in.Room)
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	return &presenceOutput{Body: p}, nil
}
