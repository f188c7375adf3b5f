package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/names"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/realtime/stream"
)

// HistoryReader reads a stream's stored events as frames.
type HistoryReader interface {
	History(ctx context.Context, name, epoch string, since int64, limit int) (realtime.History, error)
}

type historyInput struct {
	Stream string `query:"stream" required:"true" minLength:"6" maxLength:"256" doc:"user:<your user id>, inbox:<your user id>, project:<project id> or room:<room name>"`
	Since  int64  `query:"since" minimum:"0" doc:"the last offset you have: events after it are returned (0: from the oldest retained)"`
	Epoch  string `query:"epoch" maxLength:"64" doc:"the epoch of since; when it is not the stream's, recovered is false"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"at most this many events (and at most the read budget in bytes, SWITCHBOARD_READ_BYTES, default 1 MiB: a page may hold fewer; read on from next_offset while more)"`
}

type historyBody struct {
	Stream string            `json:"stream"`
	Epoch  string            `json:"epoch" doc:"the stream's current epoch; empty when nothing was ever stored"`
	Events []json.RawMessage `json:"events" doc:"stored frames in offset order, exactly as a WebSocket receives them"`
	Oldest int64             `json:"oldest_offset" doc:"the first retained offset (last_offset + 1 when none is)"`
	Last   int64             `json:"last_offset" doc:"the stream's latest offset"`
	Next   int64             `json:"next_offset" doc:"where to read on: pass it as since for the next page (the last event's offset, or since moved up to oldest_offset - 1)"`
	More   bool              `json:"more" doc:"true when events after next_offset remain: the page stopped at limit or at the byte budget"`
	// Recovered: nothing after since is missing from retained history.
	Recovered bool `json:"recovered" doc:"false when since is older than retained history, beyond the stream's head, or of another epoch: refetch your state"`
}

type historyOutput struct {
	Body historyBody
}

func registerHistory(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "history-read", Method: http.MethodGet, Path: "/v1/history",
		Summary: "Read a stream's stored events",
		Description: "The events of `user:<your id>` (what you and the server addressed to you), `inbox:<your id>` " +
			"(what other users addressed to you), `project:<id>` (a project's run events) or `room:<name>` after offset `since`, " +
			"as the frames a WebSocket receives (with `stream`, `offset`, `epoch`). The same data a `resume` frame replays. " +
			"A page holds at most `limit` events and at most the read budget in bytes (default 1 MiB; at least one event): " +
			"while `more` is true, read on with `since` = `next_offset`.",
		Tags: []string{"Realtime"}, Security: bearer,
		Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity},
	}, s.readHistory)
}

func (s *Server) readHistory(ctx context.Context, in *historyInput) (*historyOutput, error) {
	name, err := s.historyStream(ctx, in.Stream)
	if err != nil {
		return nil, err
	}
	h, err := s.opts.History.History(ctx, name, in.Epoch, in.Since, in.Limit)
	if errors.Is(err, stream.ErrInvalid) {
		return nil, huma.Error422UnprocessableEntity(err.Error())
	}
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	return &historyOutput{Body: historyBody{Stream: h.Stream, Epoch: h.Epoch, Events: h.Events,
		Oldest: h.Oldest, Last: h.Last, Next: h.Next, More: h.More, Recovered: h.Recovered}}, nil
}

// projectHistoryStream checks that the caller may read the project's
// stream (a member acting in it through ProjectHeader, or an API key of
// the project; admins any): 404 otherwise, as for any project id.
func (s *Server) projectHistoryStream(ctx context.Context, project string) (string, error) {
	id, err := uuid.Parse(project)
	if err != nil {
		return "", huma.Error422UnprocessableEntity("stream: a project stream is project:<project id>")
	}
	p := principal(ctx)
	if p.IsAdmin() {
		return stream.ProjectStream(id.String()), nil
	}
	member, err := accounts.IsMember(ctx, s.opts.Pool, id.String(), p.UserID)
	switch {
	case err != nil:
		return "", s.fail(ctx, err, "", "")
	case !member || p.KeyID != "" && p.ProjectID != id.String():
		return "", huma.Error404NotFound(projectNotFound)
	}
	return stream.ProjectStream(id.String()), nil
}

// historyStream checks that the caller may read name (its own user stream
// or inbox, a stream of one of its projects, an open room, a members-only
// room it is a member of; admins any) and returns its canonical form.
func (s *Server) historyStream(ctx context.Context, name string) (string, error) {
	if user, ok := strings.CutPrefix(name, "user:"); ok {
		return ownHistoryStream(ctx, "user", user, stream.UserStream)
	}
	if user, ok := strings.CutPrefix(name, "inbox:"); ok {
		return ownHistoryStream(ctx, "inbox", user, stream.InboxStream)
	}
	if project, ok := strings.CutPrefix(name, "project:"); ok {
		return s.projectHistoryStream(ctx, project)
	}
	room, ok := strings.CutPrefix(name, "room:")
	if !ok {
		return "", huma.Error422UnprocessableEntity(`stream must be "user:<user id>", "inbox:<user id>", "project:<project id>" or "room:<room name>"`)
	}
	if err := names.Room(room); err != nil {
		return "", huma.Error422UnprocessableEntity("stream: " + err.Error())
	}
	if err := s.requireRoomUse(ctx, room); err != nil { // rooms.go
		return "", err
	}
	return stream.RoomStream(room), nil
}

// ownHistoryStream checks that the caller may read user's stream of kind
// (user or inbox: its own; admins anyone's) and returns its canonical
// name.
func ownHistoryStream(ctx context.Context, kind, user string, canonical func(string) string) (string, error) {
	id, err := realtime.NormalizeUserID(user)
	if err != nil {
		return "", huma.Error422UnprocessableEntity("stream: " + err.Error())
	}
	if p := principal(ctx); id != p.UserID && !p.IsAdmin() {
		return "", huma.Error403Forbidden("you may read only your own " + kind + " stream, " + kind + ":" + p.UserID)
	}
	return canonical(id), nil
}
