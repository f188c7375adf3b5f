package main

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/switchboard/switchboard/infra/tracing"
)

// appOptions are what tests change in a replica beyond its configuration.
type appOptions struct {
	// spanExporter turns tracing on with this exporter (an in-memory one).
	spanExporter sdktrace.SpanExporter
}

// newTracing builds the tracer provider the OTEL_* variables ask for
// (none when they ask for nothing); its TracerProvider goes to the HTTP
// server, River, the webhook client and the bus.
func (a *app) newTracing(ctx context.Context, opts appOptions) error {
	t := a.cfg.Tracing
	var err error
	a.tracing, err = tracing.New(ctx, tracing.Options{
		Exporter: t.Exporter(), Protocol: t.Protocol(), ServiceName: t.ServiceName, ServiceVersion: version,
		InstanceID: a.nodeID, SpanExporter: opts.spanExporter,
	})
	return err
}

// stopTracing exports the spans still buffered: it stops last, so the
// spans of the shutdown itself go out too, within a budget of its own.
func (a *app) stopTracing(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.tracing.Shutdown(ctx); err != nil {
		a.logger.Warn("spans not exported at shutdown", "error", err)
	}
}
