package web

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/names"
	"github.com/switchboard/switchboard/realtime"
)

// EventPublisher delivers an event to sockets on every replica.
type EventPublisher interface {
	Publish(ctx context.Context, ev realtime.Event) error
}

// maxEventBytes bounds an event's body: a frame clients may receive.
const maxEventBytes = 64 << 10

type eventInput struct {
	Body struct {
		To      string          `json:"to,omitempty" format:"uuid" doc:"user id: every connection of that user (stored in its inbox:<id> stream, or in user:<id> when it is you); exactly one of to and room"`
		Room    string          `json:"room,omitempty" minLength:"1" maxLength:"128" doc:"room: every member on every node; exactly one of to and room. 1-128 bytes, no control characters, no white space at either end"`
		Event   string          `json:"event" minLength:"1" maxLength:"64" pattern:"^[A-Za-z0-9][A-Za-z0-9._:-]*$" doc:"event name: letters, digits and . _ : -; names starting task., rpc., server. and room. are reserved"`
		Payload json.RawMessage `json:"payload,omitempty" doc:"any JSON value"`
	}
}

type eventOutput struct {
	Body struct {
		ID string `json:"id" format:"uuid" doc:"the event id, also in the frame's id"`
	}
}

func registerEvents(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "events-publish", Method: http.MethodPost, Path: "/v1/events",
		Summary: "Publish an event to a user or a room",
		Description: "Delivered to every connection of the user, or every member of the room, on every node. `from` is the caller. " +
			"An event `to` another user is stored in their stream `inbox:<their id>`, one to yourself in `user:<your id>`: " +
			"what others send has its own retention and never pushes your own and the server's events out. " +
			"Posting to a members-only room needs membership (403).",
		Tags: []string{"Realtime"}, Security: bearer, DefaultStatus: http.StatusAccepted,
		MaxBodyBytes: maxEventBytes,
		Errors:       []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity},
	}, s.publishEvent)
}

func (s *Server) publishEvent(ctx context.Context, in *eventInput) (*eventOutput, error) {
	b := in.Body
	if err := names.ClientEvent(b.Event); err != nil {
		return nil, huma.Error422UnprocessableEntity(err.Error())
	}
	if (b.To == "") == (b.Room == "") {
		return nil, huma.Error422UnprocessableEntity(`give exactly one of "to" (a user id) and "room"`)
	}
	ev := realtime.Event{Event: b.Event, Room: b.Room, From: principal(ctx).UserID, ID: uuid.NewString(), Payload: b.Payload}
	if b.To != "" {
		to, err := realtime.NormalizeUserID(b.To)
		if err != nil {
			return nil, huma.Error422UnprocessableEntity(err.Error())
		}
		ev.To = to
	} else if err := names.Room(b.Room); err != nil {
		return nil, huma.Error422UnprocessableEntity(err.Error())
	} else if err := s.requireRoomMember(ctx, b.Room); err != nil {
		return nil, err
	}
	if err := s.opts.Events.Publish(ctx, ev); err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	out := &eventOutput{}
	out.Body.ID = ev.ID
	return out, nil
}
