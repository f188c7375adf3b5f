package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/realtime"
)

// RPCCaller calls a user's client over its socket and waits for the answer.
type RPCCaller interface {
	CallClient(ctx context.Context, userID, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error)
}

const defaultRPCTimeoutMS = 10000

type rpcInput struct {
	IDPath // the user whose client answers
	Body   struct {
		Method    string          `json:"method" minLength:"1" maxLength:"128" doc:"what the client should do"`
		Params    json.RawMessage `json:"params,omitempty" doc:"any JSON value"`
		TimeoutMS int             `json:"timeout_ms,omitempty" minimum:"1" maximum:"30000" default:"10000" doc:"how long to wait for the answer"`
	}
}

type rpcOutput struct {
	Body struct {
		Result json.RawMessage `json:"result" doc:"the client's rpc.result payload"`
	}
}

func registerRPC(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "users-rpc", Method: http.MethodPost, Path: "/v1/users/{id}/rpc",
		Summary: "Call a user's client and wait for its answer",
		Description: "Sends `rpc.call` (id, payload `{\"method\",\"params\"}`) to the user's connections on every node; " +
			"the first `rpc.result` with that id is the answer. 404 when the user has no connection anywhere, 504 when " +
			"no answer comes within timeout_ms. Callers may call themselves; admins anyone.",
		Tags: []string{"Realtime"}, Security: bearer, MaxBodyBytes: maxEventBytes,
		Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusGatewayTimeout},
	}, s.callUser)
}

func (s *Server) callUser(ctx context.Context, in *rpcInput) (*rpcOutput, error) {
	p := principal(ctx)
	userID, err := realtime.NormalizeUserID(in.ID)
	if err != nil {
		return nil, huma.Error422UnprocessableEntity(err.Error())
	}
	if userID != p.UserID && !p.IsAdmin() {
		return nil, huma.Error403Forbidden("you may call only your own clients; admins may call anyone's")
	}
	ms := in.Body.TimeoutMS
	if ms == 0 {
		ms = defaultRPCTimeoutMS
	}
	res, err := s.opts.RPC.CallClient(ctx, userID, in.Body.Method, in.Body.Params, time.Duration(ms)*time.Millisecond)
	switch {
	case errors.Is(err, realtime.ErrNotConnected):
		return nil, huma.Error404NotFound(fmt.Sprintf("user %s has no live WebSocket connection on any node", userID))
	case errors.Is(err, realtime.ErrRPCTimeout):
		return nil, huma.Error504GatewayTimeout(fmt.Sprintf("the user's client did not answer within %d ms", ms))
	case err != nil:
		return nil, s.fail(ctx, err, "", "")
	}
	out := &rpcOutput{}
	out.Body.Result = res
	return out, nil
}
