package workers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard/switchboard/jobs"
)

// TestWebhookTraceparent: with tracing on, every hop of a webhook call
// (a redirect too) gets a client span under the caller's span and sends
// the target that span as traceparent; the span names no path or query
// (they hold webhooks' credentials). With tracing off no header is sent,
// even from a traced context.
func TestWebhookTraceparent(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	final := newHookServer(t, func(int, http.ResponseWriter, *http.Request) {})
	first := newHookServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, final.URL+"/hook?token=s3cret", http.StatusTemporaryRedirect)
	})
	send := func(client *WebhookClient, ctx context.Context) {
		t.Helper()
		_, err := client.Send(ctx, WebhookRequest{URL: first.URL + "/in?token=s3cret", Method: http.MethodPost, Body: []byte(`{}`),
			MsgID: "m", Secret: jobs.NewSigningSecret(), Headers: map[string]string{"traceparent": "forged"}})
		if err != nil {
			t.Fatal(err)
		}
	}

	ctx, root := tp.Tracer("test").Start(context.Background(), "river.work/task_run")
	send(NewWebhookClient(WebhookOptions{AllowPrivate: true, TracerProvider: tp}), ctx)
	root.End()
	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.SpanContext.SpanID().String()] = s
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), "s3cret") || strings.Contains(a.Value.String(), "/hook") {
				t.Errorf("span %s records %s=%s", s.Name, a.Key, a.Value.String())
			}
		}
	}
	for i, h := range append(first.requests(), final.requests()...) {
		var version, traceID, spanID, flags string
		if _, err := fmt.Sscanf(strings.ReplaceAll(h.header.Get("traceparent"), "-", " "), "%s %s %s %s", &version, &traceID, &spanID, &flags); err != nil {
			t.Fatalf("hop %d: traceparent %q", i, h.header.Get("traceparent"))
		}
		s, ok := spans[spanID]
		switch {
		case !ok:
			t.Fatalf("hop %d: traceparent %s names no exported span", i, h.header.Get("traceparent"))
		case traceID != root.SpanContext().TraceID().String() || s.Parent.SpanID() != root.SpanContext().SpanID():
			t.Errorf("hop %d: span %s is not a child of the caller's span", i, s.Name)
		case s.Name != "webhook POST":
			t.Errorf("hop %d: span named %q", i, s.Name)
		}
	}
	if len(first.requests()) != 1 || len(final.requests()) != 1 {
		t.Fatalf("requests: %d then %d", len(first.requests()), len(final.requests()))
	}

	send(NewWebhookClient(WebhookOptions{AllowPrivate: true}), ctx)
	if h := first.requests()[1].header.Get("traceparent"); h != "forged" {
		t.Fatalf("tracing off: traceparent %q, want the task's own header untouched", h)
	}
}
