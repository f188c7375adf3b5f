package realtime

import (
	"context"
	"testing"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

// TestPublishSpan: a Publish in a traced context gets a child span that
// names the event and its stream, and ends once the event is stored and
// delivered; a Publish outside any trace (a socket's frame) gets none.
func TestPublishSpan(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	n := startNode(t, dbtest.NewDatabaseURL(t), HubOptions{}, func(o *Options) { o.Bus.TracerProvider = tp })
	alice := uuid.NewString()
	c := dial(t, n, alice)

	ctx, parent := tp.Tracer("test").Start(context.Background(), "river.work/task_run")
	if err := n.bus.PublishUser(ctx, alice, "task.run.succeeded", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "task.run.succeeded")
	if err := n.bus.PublishUser(context.Background(), alice, "untraced", nil); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "untraced")
	parent.End()

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the publish and its parent: %v", len(spans), spans)
	}
	s := spans[0]
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	switch {
	case s.Name != "realtime.publish task.run.succeeded":
		t.Fatalf("span %q", s.Name)
	case s.Parent.SpanID() != parent.SpanContext().SpanID():
		t.Errorf("not a child of the caller's span")
	case attrs["event"] != "task.run.succeeded" || attrs["stream"] != stream.UserStream(alice):
		t.Errorf("attributes %v", attrs)
	}
}
