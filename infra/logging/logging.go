// Package logging builds the one *slog.Logger the process uses: JSON in
// production, text on a terminal; a line logged with a traced context
// carries its trace_id and span_id.
package logging

import (
	"io"
	"log/slog"
	"os"
	"strings"
)

// New returns a logger writing to w. format is "json", "text" or "" (text
// when w is a terminal, JSON otherwise).
func New(w io.Writer, format, level string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(strings.ToUpper(level)))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(traceHandler{slog.NewTextHandler(w, opts)})
	}
	return slog.New(traceHandler{slog.NewJSONHandler(w, opts)})
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
