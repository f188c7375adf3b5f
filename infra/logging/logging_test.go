package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceIDs: a line logged with a context that holds a span carries its
// trace and span ids, in JSON and text, through With; other lines do not.
func TestTraceIDs(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled,
	})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	var buf bytes.Buffer
	logger := New(&buf, "json", "info").With("component", "test")
	logger.InfoContext(traced, "traced")
	logger.InfoContext(context.Background(), "plain")
	logger.Info("no context")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), buf.Bytes())
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		if m["component"] != "test" {
			t.Errorf("line %d lost the logger's attributes: %s", i, l)
		}
		_, has := m["trace_id"]
		switch {
		case i == 0 && (m["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || m["span_id"] != "00f067aa0ba902b7"):
			t.Errorf("traced line: %s", l)
		case i > 0 && has:
			t.Errorf("untraced line %d has a trace id: %s", i, l)
		}
	}
	buf.Reset()
	New(&buf, "text", "info").InfoContext(traced, "traced")
	if !bytes.Contains(buf.Bytes(), []byte("trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7")) {
		t.Errorf("text line: %s", buf.Bytes())
	}
}

// BenchmarkLog is what the trace-id handler adds to a line logged without
// a span (tracing off): one context lookup.
func BenchmarkLog(b *testing.B) {
	for name, h := range map[string]func(io.Writer) slog.Handler{
		"json":           func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, nil) },
		"json+trace ids": func(w io.Writer) slog.Handler { return traceHandler{slog.NewJSONHandler(w, nil)} },
	} {
		b.Run(name, func(b *testing.B) {
			logger := slog.New(h(io.Discard))
			ctx := context.Background()
			for b.Loop() {
				logger.InfoContext(ctx, "request", "method", "GET", "status", 200)
			}
		})
	}
}
