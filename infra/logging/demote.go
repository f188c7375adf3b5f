package logging

import (
	"context"
	"log/slog"
)

// Demoted is l with every record below warn logged at debug: for a
// library's routine chatter (River's client starting and stopping as it
// parks and wakes, its producers' counts), which a person running the
// service needs only when debugging. Warnings and errors keep their level.
func Demoted(l *slog.Logger) *slog.Logger { return slog.New(demoted{l.Handler()}) }

// demoted is the handler of Demoted.
type demoted struct{ slog.Handler }

// demote lowers a level below warn to debug (or keeps it, if lower).
func demote(l slog.Level) slog.Level {
	if l >= slog.LevelWarn {
		return l
	}
	return min(l, slog.LevelDebug)
}

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool {
	return d.Handler.Enabled(ctx, demote(l))
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.Handler.Handle(ctx, r)
}

func (d demoted) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoted{d.Handler.WithAttrs(attrs)}
}

func (d demoted) WithGroup(name string) slog.Handler { return demoted{d.Handler.WithGroup(name)} }
