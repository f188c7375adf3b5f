package workers

import (
	"context"
	"fmt"
	"log/slog"
)

// Publisher delivers realtime events to the sockets of users, of rooms'
// members and of projects' members on every replica.
type Publisher interface {
	PublishUser(ctx context.Context, userID, event string, payload any) error
	PublishRoom(ctx context.Context, room, event string, payload any) error
	PublishProject(ctx context.Context, projectID, event string, payload any) error
}

// RoomAccess answers whether a user may post to a room (realtime.Rooms):
// a publish action posts as its task's owner.
type RoomAccess interface {
	CanUseRoom(ctx context.Context, room, user string) (bool, error)
}

// checkRoom refuses a publish to a members-only room whose member the
// task's owner is not (not retried: membership is the owner's to fix); a
// failed check is retried.
func (w *runWorker) checkRoom(ctx context.Context, owner, room string) *attempt {
	if w.rooms == nil {
		return nil
	}
	ok, err := w.rooms.CanUseRoom(ctx, room, owner)
	switch {
	case err != nil:
		return &attempt{err: fmt.Errorf("check room access: %w", err), retryable: true}
	case !ok:
		return &attempt{err: fmt.Errorf("room %q is for its members only and the task's owner is not one; its owner or an admin adds members", room)}
	}
	return nil
}

// LogPublisher stands in for the realtime bus: it logs each event at debug
// level and delivers nothing.
type LogPublisher struct {
	Logger *slog.Logger
}

// PublishUser logs an event addressed to a user.
func (p LogPublisher) PublishUser(ctx context.Context, userID, event string, _ any) error {
	p.log(ctx, "user", userID, event)
	return nil
}

// PublishProject logs an event addressed to a project's stream.
func (p LogPublisher) PublishProject(ctx context.Context, projectID, event string, _ any) error {
	p.log(ctx, "project", projectID, event)
	return nil
}

// PublishRoom logs an event addressed to a room.
func (p LogPublisher) PublishRoom(ctx context.Context, room, event string, _ any) error {
	p.log(ctx, "room", room, event)
	return nil
}

func (p LogPublisher) log(ctx context.Context, kind, to, event string) {
	if p.Logger != nil {
		p.Logger.DebugContext(ctx, "publish (no realtime bus wired)", "to_"+kind, to, "event", event)
	}
}
