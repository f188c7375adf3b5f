package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/realtime"
)

// TicketStore issues single-use WebSocket tickets and redeems them.
type TicketStore interface {
	Issue(ctx context.Context, userID string) (string, time.Time, error)
	Redeem(ctx context.Context, ticket string) (string, error)
}

// SocketHub turns requests into WebSocket sessions of a user.
type SocketHub interface {
	// Admit checks origin, draining and the upgrade headers before a ticket
	// is spent.
	Admit(r *http.Request) error
	// Serve upgrades and serves the socket until it closes.
	Serve(w http.ResponseWriter, r *http.Request, userID string) error
}

type ticketBody struct {
	Ticket    string    `json:"ticket" doc:"single use, valid 30 s on any node: connect to GET /v1/ws?ticket=…"`
	ExpiresAt time.Time `json:"expires_at"`
}

type ticketOutput struct {
	Body ticketBody
}

func registerRealtime(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "ws-ticket", Method: http.MethodPost, Path: "/v1/ws/ticket",
		Summary:     "Get a WebSocket ticket",
		Description: "A single-use ticket, valid for 30 s on any node, for `GET /v1/ws?ticket=…` (browsers cannot send an Authorization header on a WebSocket).",
		Tags:        []string{"Realtime"}, Security: bearer, DefaultStatus: http.StatusCreated,
		Errors: []int{http.StatusUnauthorized},
	}, s.issueTicket)
	api.OpenAPI().AddOperation(&huma.Operation{
		OperationID: "ws-connect", Method: http.MethodGet, Path: "/v1/ws",
		Summary: "Open a WebSocket",
		Description: "Upgrades to a WebSocket with a ticket from `POST /v1/ws/ticket`. Frames, both directions: " +
			"`{\"event\",\"room\"?,\"to\"?,\"from\"?,\"id\"?,\"payload\"?,\"ts\"?}`; see docs/api.md \"Realtime\". " +
			"Client frames are rate limited per connection and per user (an `error` event with code `rate_limited`, then close 4029). " +
			"A client that does not read fast enough is closed with code 3008.",
		Tags: []string{"Realtime"}, Security: public,
		Parameters: []*huma.Param{{
			Name: "ticket", In: "query", Required: true, Description: "ticket from POST /v1/ws/ticket",
			Schema: &huma.Schema{Type: huma.TypeString},
		}},
		Responses: map[string]*huma.Response{
			"101": {Description: "Switching Protocols: the socket is open"},
			"401": {Description: "Missing, unknown, expired or used ticket"},
			"429": {Description: "The user already holds SWITCHBOARD_WS_MAX_CONNS_PER_USER sockets on this node"},
			"403": {Description: "Origin not allowed (SWITCHBOARD_ALLOWED_ORIGINS)"},
			"503": {Description: "The node is draining; connect to another"},
		},
	})
	s.router.Get("/v1/ws", s.serveWS)
}

func (s *Server) issueTicket(ctx context.Context, _ *struct{}) (*ticketOutput, error) {
	ticket, exp, err := s.opts.Tickets.Issue(ctx, principal(ctx).UserID)
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	return &ticketOutput{Body: ticketBody{Ticket: ticket, ExpiresAt: exp}}, nil
}

// serveWS checks everything that can be refused with an HTTP answer before
// the upgrade: the ticket's presence, origin and draining, then spends the
// ticket. Only then does it upgrade.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	if ticket == "" {
		writeProblem(w, http.StatusUnauthorized, "missing ticket: get one from POST /v1/ws/ticket and connect to /v1/ws?ticket=<ticket>")
		return
	}
	if err := s.opts.Sockets.Admit(r); err != nil {
		s.refuseSocket(w, r, err)
		return
	}
	userID, err := s.opts.Tickets.Redeem(r.Context(), ticket)
	if errors.Is(err, realtime.ErrTicketInvalid) {
		writeProblem(w, http.StatusUnauthorized, err.Error())
		return
	}
	if err != nil {
		s.opts.Logger.ErrorContext(r.Context(), "redeem ticket", "error", err)
		writeInternal(w, r, err)
		return
	}
	// The ticket was issued to an enabled account; it may have been
	// disabled or deleted in the 30 s since.
	var refused *accounts.RefusedError
	if _, err := s.activeRole(r.Context(), userID); errors.As(err, &refused) {
		writeProblem(w, http.StatusUnauthorized, refused.Error())
		return
	} else if err != nil {
		writeInternal(w, r, err)
		return
	}
	if err := s.opts.Sockets.Serve(w, r, userID); err != nil {
		// A failed upgrade has been answered by the upgrader already.
		if errors.Is(err, realtime.ErrDraining) || errors.Is(err, realtime.ErrTooManyConnections) || errors.Is(err, realtime.ErrUnavailable) {
			s.refuseSocket(w, r, err)
			return
		}
		s.opts.Logger.DebugContext(r.Context(), "websocket upgrade failed", "error", err)
	}
}

func (s *Server) refuseSocket(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, realtime.ErrDraining), errors.Is(err, realtime.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, realtime.ErrTooManyConnections):
		writeProblem(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, realtime.ErrOrigin):
		writeProblem(w, http.StatusForbidden, fmt.Sprintf("origin %q may not open WebSockets here; the operator lists allowed origins in SWITCHBOARD_ALLOWED_ORIGINS", r.Header.Get("Origin")))
	default:
		writeProblem(w, http.StatusBadRequest, err.Error())
	}
}
