package web

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/infra/tracing"
)

// traceRequests gives every request but probes and scrapes a server span
// (otelhttp: it continues a caller's traceparent, and its context is the
// one the request log and handlers see), named after the route pattern
// once chi has matched it: "POST /v1/tasks/{id}/runs", never the raw path.
func traceRequests(tp trace.TracerProvider) func(http.Handler) http.Handler {
	mw := otelhttp.NewMiddleware("http",
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(tracing.Propagator),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()), // metrics are Prometheus'
		otelhttp.WithFilter(traced),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
	return func(next http.Handler) http.Handler { return mw(nameSpan(next)) }
}

// traced leaves out /metrics and the health probes: they come every few
// seconds and tell nothing a trace would.
func traced(r *http.Request) bool {
	return r.URL.Path != "/metrics" && !strings.HasPrefix(r.URL.Path, "/healthz/")
}

// nameSpan renames the request's span after the matched route (known only
// once the router ran) and records the request id.
func nameSpan(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		span := trace.SpanFromContext(r.Context())
		if !span.IsRecording() {
			return
		}
		span.SetAttributes(attribute.String("request_id", w.Header().Get("X-Request-ID")))
		if route := routePattern(r); route != "unmatched" {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
	})
}
