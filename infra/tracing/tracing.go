// Package tracing owns the process's OpenTelemetry tracer provider. It is
// off unless the standard OTEL_* variables ask for it (infra/config's
// Tracing); then spans go to an OTLP collector (http/protobuf or grpc) or
// to stdout. Components take a trace.TracerProvider that is nil when
// tracing is off, and then install nothing: no middleware, no exporter,
// no goroutine. Trace context travels as W3C traceparent (Propagator).
package tracing

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/infra/config"
)

// Propagator is how trace context crosses a process boundary: W3C
// traceparent and tracestate, in HTTP headers (API requests in, webhook
// calls out) and in River job metadata. Baggage is not carried: a client's
// baggage must not reach a customer's webhook.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Options say what to build; zero values mean defaults.
type Options struct {
	// Exporter is config.TraceExporterOTLP, config.TraceExporterConsole, or "" (tracing off).
	Exporter string
	// Protocol of the OTLP exporter: "http/protobuf" (default) or
	// config.OTLPProtocolGRPC. Endpoint, headers, timeout and TLS come from the
	// OTEL_EXPORTER_OTLP_* variables, read by the exporter.
	Protocol string
	// ServiceName, ServiceVersion and InstanceID describe the process in
	// every span's resource; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// win. ServiceName defaults to "switchboard".
	ServiceName, ServiceVersion, InstanceID string
	// SpanExporter, when set, turns tracing on with this exporter, each span
	// exported as it ends (tests: tracetest's in-memory exporter).
	SpanExporter sdktrace.SpanExporter
}

// Tracing is the process's tracer provider, or nothing when tracing is off.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// New builds the tracer provider the options ask for; with tracing off it
// builds nothing and starts nothing. The sampler comes from
// OTEL_TRACES_SAMPLER (default parentbased_always_on).
func New(ctx context.Context, opts Options) (*Tracing, error) {
	if opts.SpanExporter == nil && opts.Exporter == "" {
		return &Tracing{}, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", cmp.Or(opts.ServiceName, "switchboard")),
			attribute.String("service.version", opts.ServiceVersion),
			attribute.String("service.instance.id", opts.InstanceID)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv()) // last: the variables win
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	if opts.SpanExporter != nil {
		return &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(opts.SpanExporter))}, nil
	}
	exp, err := newExporter(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))}, nil
}

func newExporter(ctx context.Context, opts Options) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch {
	case opts.Exporter == config.TraceExporterConsole:
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	case opts.Exporter != config.TraceExporterOTLP:
		return nil, fmt.Errorf("tracing: unknown exporter %q", opts.Exporter)
	case opts.Protocol == config.OTLPProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %s exporter: %w", opts.Exporter, err)
	}
	return exp, nil
}

// TracerProvider is what components trace with; nil when tracing is off,
// so that they install nothing.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil || t.provider == nil {
		return nil
	}
	return t.provider
}

// Shutdown exports the spans still buffered (within ctx) and stops the
// exporter. A no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}
