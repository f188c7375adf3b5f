package workers

import (
	"context"
	"log/slog"
)

// Publisher delivers realtime events to users' sockets on every replica.
type Publisher interface {
	PublishUser(ctx context.Context, userID, event string, payload any) error
	PublishRoom(ctx context.Context, room, event string, payload any) error
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
