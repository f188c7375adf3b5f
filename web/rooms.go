package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/names"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/realtime"
)

// Rooms as resources: a created room has an owner and a visibility; a name
// nobody created is an open ad-hoc room. The owner or an admin manages a
// room; access to a members-only room (join, post, typing, history,
// presence) is checked through roomAccess wherever a room is used.

// RoomStore keeps rooms and their members: realtime.Rooms.
type RoomStore interface {
	roomAccess
	Create(ctx context.Context, name, owner, visibility, project string) (realtime.Room, error)
	Get(ctx context.Context, name string) (realtime.Room, error)
	SetVisibility(ctx context.Context, name, visibility string) (realtime.Room, error)
	Delete(ctx context.Context, name string) error
	AddMember(ctx context.Context, room, user string) (realtime.RoomMember, error)
	RemoveMember(ctx context.Context, room, user string) error
	Members(ctx context.Context, room string, after time.Time, afterID string, limit int) ([]realtime.RoomMember, error)
}

// roomAccess answers whether a user may use a room.
type roomAccess interface {
	CanUseRoom(ctx context.Context, room, user string) (bool, error)
}

// Room is a created room as the API shows it.
type Room struct {
	Name       string    `json:"name"`
	OwnerID    string    `json:"owner_id" format:"uuid" doc:"the user who created it; always a member"`
	ProjectID  string    `json:"project_id" format:"uuid" doc:"the project it belongs to: its developers manage it"`
	Visibility string    `json:"visibility" enum:"open,members" doc:"open: anyone signed in may join, post and read; members: only members"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// RoomMember is one member of a room.
type RoomMember struct {
	UserID  string    `json:"user_id" format:"uuid"`
	AddedAt time.Time `json:"added_at"`
}

// RoomPath is the {name} of the room routes: a room name, percent-encoded
// in the path (a "/" as %2F).
type RoomPath struct {
	Name string `path:"name" minLength:"1" maxLength:"384" doc:"the room name, percent-encoded"`
	// resolved: Huma calls Resolve for the input type and for this
	// embedded one; decode once.
	resolved bool
}

// Resolve decodes the name when the router matched the escaped path and
// checks it against the room-name rules.
func (p *RoomPath) Resolve(ctx huma.Context) []error {
	if p.resolved {
		return nil
	}
	p.resolved = true
	if u := ctx.URL(); u.RawPath != "" {
		name, err := url.PathUnescape(p.Name)
		if err != nil {
			return []error{&huma.ErrorDetail{Location: "path.name", Message: "room name is not valid percent-encoding"}}
		}
		p.Name = name
	}
	if err := names.Room(p.Name); err != nil {
		return []error{&huma.ErrorDetail{Location: "path.name", Message: err.Error()}}
	}
	return nil
}

type roomCreateInput struct {
	Body struct {
		Name       string `json:"name" minLength:"1" maxLength:"128" doc:"1-128 bytes, no control characters, no white space at either end"`
		Visibility string `json:"visibility" enum:"open,members" doc:"members: only members may join, post, type, read its history and see its presence"`
	}
}

type roomInput struct {
	RoomPath
}

type roomPatchInput struct {
	RoomPath
	Body struct {
		Visibility string `json:"visibility" enum:"open,members" doc:"making a room members-only evicts the non-members' sockets"`
	}
}

type roomMemberInput struct {
	RoomPath
	UserID string `path:"user_id" format:"uuid" doc:"a user id (any UUID spelling)"`
}

// Resolve canonicalises the user id after the name.
func (in *roomMemberInput) Resolve(ctx huma.Context) []error {
	in.UserID = canonicalID(in.UserID)
	return nil
}

type roomMembersInput struct {
	RoomPath
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"50"`
	Cursor string `query:"cursor" maxLength:"200" doc:"next_cursor of the previous page"`
}

type roomOutput struct {
	Body Room
}

type roomMemberOutput struct {
	Body RoomMember
}

type roomMembersOutput struct {
	Body struct {
		Items      []RoomMember `json:"items" nullable:"false" doc:"oldest membership first"`
		NextCursor *string      `json:"next_cursor" doc:"pass as cursor for the next page; null on the last"`
	}
}

func registerRooms(api huma.API, s *Server) {
	reg := func(op huma.Operation) huma.Operation {
		op.Tags, op.Security = []string{"Rooms"}, bearer
		return op
	}
	huma.Register(api, reg(huma.Operation{
		OperationID: "rooms-create", Method: http.MethodPost, Path: "/v1/rooms", DefaultStatus: http.StatusCreated,
		Summary: "Create a room",
		Description: "The caller becomes its owner and first member. 409 when the name exists, or is an ad-hoc room in use " +
			"(its stream retains an event, or someone else is present in it): a room cannot take over an ad-hoc room's people or history.",
		Errors: []int{http.StatusUnauthorized, http.StatusConflict, http.StatusUnprocessableEntity},
	}), s.createRoom)
	huma.Register(api, reg(huma.Operation{
		OperationID: "rooms-get", Method: http.MethodGet, Path: "/v1/rooms/{name}",
		Summary:     "Read a room",
		Description: "404 for a name nobody created (an open ad-hoc room). A members-only room: members and admins only.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}), s.getRoom)
	huma.Register(api, reg(huma.Operation{
		OperationID: "rooms-update", Method: http.MethodPatch, Path: "/v1/rooms/{name}",
		Summary:     "Change a room's visibility",
		Description: "Owner or admin. Making it members-only evicts the sockets of non-members on every node.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}), s.updateRoom)
	huma.Register(api, reg(huma.Operation{
		OperationID: "rooms-delete", Method: http.MethodDelete, Path: "/v1/rooms/{name}", DefaultStatus: http.StatusNoContent,
		Summary:     "Delete a room",
		Description: "Owner or admin. Its members and its history go; every socket in it is evicted (room.removed, reason deleted) on every node. The name is then a new, empty ad-hoc room.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}), s.deleteRoom)
	registerRoomMembers(api, s, reg)
}

func registerRoomMembers(api huma.API, s *Server, reg func(huma.Operation) huma.Operation) {
	huma.Register(api, reg(huma.Operation{
		OperationID: "rooms-members-list", Method: http.MethodGet, Path: "/v1/rooms/{name}/members",
		Summary:     "List a room's members",
		Description: "Oldest membership first, paged with a cursor. Anyone who may use the room, and admins.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}), s.listRoomMembers)
	huma.Register(api, reg(huma.Operation{
		OperationID: "rooms-members-put", Method: http.MethodPut, Path: "/v1/rooms/{name}/members/{user_id}",
		Summary:     "Add a member",
		Description: "Owner or admin. Adding a member again changes nothing.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}), s.putRoomMember)
	huma.Register(api, reg(huma.Operation{
		OperationID: "rooms-members-delete", Method: http.MethodDelete, Path: "/v1/rooms/{name}/members/{user_id}", DefaultStatus: http.StatusNoContent,
		Summary:     "Remove a member",
		Description: "Owner or admin. The user's sockets leave the room on every node at once (room.removed, reason removed) and receive nothing posted after. 409 for the owner, who is always a member.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}), s.deleteRoomMember)
}

func (s *Server) createRoom(ctx context.Context, in *roomCreateInput) (*roomOutput, error) {
	if err := names.Room(in.Body.Name); err != nil {
		return nil, huma.Error422UnprocessableEntity(err.Error(), &huma.ErrorDetail{Location: "body.name", Message: err.Error()})
	}
	r, err := s.opts.Rooms.Create(ctx, in.Body.Name, principal(ctx).UserID, in.Body.Visibility, principal(ctx).ProjectID)
	if err != nil {
		return nil, s.roomFail(ctx, err, in.Body.Name)
	}
	return &roomOutput{Body: roomOf(r)}, nil
}

func (s *Server) getRoom(ctx context.Context, in *roomInput) (*roomOutput, error) {
	r, err := s.opts.Rooms.Get(ctx, in.Name)
	if err != nil {
		return nil, s.roomFail(ctx, err, in.Name)
	}
	if err := s.requireRoomUse(ctx, r.Name); err != nil {
		return nil, err
	}
	return &roomOutput{Body: roomOf(r)}, nil
}

func (s *Server) updateRoom(ctx context.Context, in *roomPatchInput) (*roomOutput, error) {
	if err := s.requireRoomOwner(ctx, in.Name); err != nil {
		return nil, err
	}
	r, err := s.opts.Rooms.SetVisibility(ctx, in.Name, in.Body.Visibility)
	if err != nil {
		return nil, s.roomFail(ctx, err, in.Name)
	}
	return &roomOutput{Body: roomOf(r)}, nil
}

func (s *Server) deleteRoom(ctx context.Context, in *roomInput) (*struct{}, error) {
	if err := s.requireRoomOwner(ctx, in.Name); err != nil {
		return nil, err
	}
	if err := s.opts.Rooms.Delete(ctx, in.Name); err != nil {
		return nil, s.roomFail(ctx, err, in.Name)
	}
	return nil, nil
}

func (s *Server) listRoomMembers(ctx context.Context, in *roomMembersInput) (*roomMembersOutput, error) {
	if err := s.requireRoomUse(ctx, in.Name); err != nil {
		return nil, err
	}
	after, afterID := time.Time{}, "00000000-0000-0000-0000-000000000000"
	if in.Cursor != "" {
		var err error
		if after, afterID, err = jobs.DecodeCursor(in.Cursor); err != nil {
			return nil, huma.Error422UnprocessableEntity(err.Error(), &huma.ErrorDetail{Location: "query.cursor", Message: err.Error()})
		}
	}
	ms, err := s.opts.Rooms.Members(ctx, in.Name, after, afterID, in.Limit)
	if err != nil {
		return nil, s.roomFail(ctx, err, in.Name)
	}
	out := &roomMembersOutput{}
	if len(ms) > in.Limit {
		ms = ms[:in.Limit]
		last := ms[len(ms)-1]
		out.Body.NextCursor = nilIfEmpty(jobs.EncodeCursor(last.AddedAt, last.UserID))
	}
	out.Body.Items = make([]RoomMember, len(ms))
	for i, m := range ms {
		out.Body.Items[i] = RoomMember{UserID: m.UserID, AddedAt: m.AddedAt}
	}
	return out, nil
}

func (s *Server) putRoomMember(ctx context.Context, in *roomMemberInput) (*roomMemberOutput, error) {
	if err := s.requireRoomOwner(ctx, in.Name); err != nil {
		return nil, err
	}
	m, err := s.opts.Rooms.AddMember(ctx, in.Name, in.UserID)
	if err != nil {
		return nil, s.roomFail(ctx, err, in.Name)
	}
	return &roomMemberOutput{Body: RoomMember{UserID: m.UserID, AddedAt: m.AddedAt}}, nil
}

func (s *Server) deleteRoomMember(ctx context.Context, in *roomMemberInput) (*struct{}, error) {
	if err := s.requireRoomOwner(ctx, in.Name); err != nil {
		return nil, err
	}
	if err := s.opts.Rooms.RemoveMember(ctx, in.Name, in.UserID); err != nil {
		return nil, s.roomFail(ctx, err, in.Name)
	}
	return nil, nil
}

// requireRoomOwner: the room exists and the caller owns it, is a
// developer (or more) of the project it belongs to acting in that project,
// or is an admin.
func (s *Server) requireRoomOwner(ctx context.Context, name string) error {
	r, err := s.opts.Rooms.Get(ctx, name)
	if err != nil {
		return s.roomFail(ctx, err, name)
	}
	p := principal(ctx)
	team := r.ProjectID == p.ProjectID && accounts.RoleAtLeast(p.ProjectRole, accounts.ProjectDeveloper)
	if r.OwnerID != p.UserID && !team && !p.IsAdmin() {
		return huma.Error403Forbidden("only the room's owner, a developer of its project or an admin may change it or its members")
	}
	return nil
}

// requireRoomUse: the caller may use the room (an open one, or a
// members-only one they are a member of) or is an admin.
func (s *Server) requireRoomUse(ctx context.Context, room string) error {
	if principal(ctx).IsAdmin() {
		return nil
	}
	return s.requireRoomMember(ctx, room)
}

// requireRoomMember: the caller may use the room; admins too need
// membership (joining, posting). Without a room store every room is open.
func (s *Server) requireRoomMember(ctx context.Context, room string) error {
	if s.opts.Rooms == nil {
		return nil
	}
	ok, err := s.opts.Rooms.CanUseRoom(ctx, room, principal(ctx).UserID)
	switch {
	case err != nil:
		return s.fail(ctx, err, "", "")
	case !ok:
		return huma.Error403Forbidden("room " + quoteName(room) + " is for its members only; its owner or an admin adds members (PUT /v1/rooms/{name}/members/{user_id})")
	}
	return nil
}

// requirePublishRoom: a publish action to a room needs the caller (the
// task's owner) to be able to use it. The worker checks again at each run:
// membership may end after the task was made.
func (s *Server) requirePublishRoom(ctx context.Context, a *jobs.Action) error {
	if a == nil || a.Type != jobs.ActionPublish || a.Room == "" || names.Room(a.Room) != nil {
		return nil // validation reports a bad room
	}
	return s.requireRoomMember(ctx, a.Room)
}

func quoteName(room string) string { return `"` + truncate(room, 128) + `"` }

// roomFail maps the room store's errors to problems.
func (s *Server) roomFail(ctx context.Context, err error, name string) error {
	switch {
	case errors.Is(err, realtime.ErrNoRoom):
		return huma.Error404NotFound("no room " + quoteName(name) + " was created (a name nobody created is an open ad-hoc room)")
	case errors.Is(err, realtime.ErrRoomExists):
		return huma.Error409Conflict("a room named " + quoteName(name) + " exists")
	case errors.Is(err, realtime.ErrRoomInUse):
		return huma.Error409Conflict("the ad-hoc room " + quoteName(name) + " is in use (events retained in its stream, or others present in it): " +
			"a room cannot be created over it; choose another name, or create it once its events have expired and nobody is in it")
	case errors.Is(err, realtime.ErrNoUser):
		return huma.Error404NotFound("no account has this user id")
	case errors.Is(err, realtime.ErrOwnerMember):
		return huma.Error409Conflict("the owner is always a member of the room; delete the room instead")
	}
	return s.fail(ctx, err, "", "")
}

func roomOf(r realtime.Room) Room {
	return Room{Name: r.Name, OwnerID: r.OwnerID, ProjectID: r.ProjectID, Visibility: r.Visibility, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}
