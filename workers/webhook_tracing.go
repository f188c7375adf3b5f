package workers

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/infra/tracing"
)

// tracedTransport gives every webhook request (each redirect hop too) a
// client span and sends the target its traceparent. The span names the
// target's scheme, host and port only: a webhook's path and query often
// hold its credentials, and traces are not the place for them. It ends
// when the response headers arrive.
type tracedTransport struct {
	next   http.RoundTripper
	tracer trace.Tracer
}

func newTracedTransport(next http.RoundTripper, tp trace.TracerProvider) http.RoundTripper {
	if tp == nil {
		return next
	}
	return &tracedTransport{next: next, tracer: tp.Tracer("github.com/switchboard/switchboard/workers")}
}

func (t *tracedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := t.tracer.Start(r.Context(), "webhook "+r.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.scheme", r.URL.Scheme),
			attribute.String("server.address", r.URL.Hostname()), attribute.String("server.port", effectivePort(r.URL))))
	defer span.End()
	r = r.Clone(ctx) // a RoundTripper must not change the caller's request
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	res, err := t.next.RoundTrip(r)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", res.StatusCode))
	if res.StatusCode >= 400 {
		span.SetStatus(codes.Error, http.StatusText(res.StatusCode))
	}
	return res, nil
}
