package realtime

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Publish delivers ev to local sockets at once and queues it for the other
// replicas; a stored event returns once appended to its stream. Exactly
// one of To and Room, or neither (everyone).
//
// With tracing on, a Publish made in a traced context (an API request, a
// job) gets a span, "realtime.publish <event>", that lasts until the
// event is durable (stored) or queued (ephemeral). Frames sockets send
// are not traced: they carry no trace, and typing alone would be a trace
// per keystroke.
func (b *Bus) Publish(ctx context.Context, ev Event) error {
	if b.opts.TracerProvider == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return b.publish(ctx, ev)
	}
	ctx, span := b.opts.TracerProvider.Tracer("github.com/switchboard/switchboard/realtime").Start(ctx, "realtime.publish "+ev.Event,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attribute.String("event", ev.Event)))
	defer span.End()
	if name := streamOf(ev); name != "" && b.opts.Store != nil {
		span.SetAttributes(attribute.String("stream", name))
	} else if ev.Room != "" {
		span.SetAttributes(attribute.String("room", ev.Room))
	}
	err := b.publish(ctx, ev)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}
