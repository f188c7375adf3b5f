package tracing

import (
	"cmp"
	"context"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestOff: without an exporter nothing is built; components then get a
// nil provider and install nothing.
func TestOff(t *testing.T) {
	t.Parallel()
	tr, err := New(context.Background(), Options{ServiceName: "x", Protocol: "grpc"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.TracerProvider() != nil || tr.provider != nil {
		t.Fatalf("tracing off built a provider")
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestResource: spans name the service, its version and instance; an
// exported span proves the provider is wired to the exporter.
func TestResource(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tr, err := New(context.Background(), Options{ServiceVersion: "v1.2.3", InstanceID: "node-1", SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.TracerProvider().Tracer("test").Start(context.Background(), "op")
	span.End()
	spans := exp.GetSpans() // before Shutdown, which empties the exporter
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["service.version"] != "v1.2.3" || attrs["service.instance.id"] != "node-1" || attrs["service.name"] != cmp.Or(os.Getenv("OTEL_SERVICE_NAME"), "switchboard") {
		t.Fatalf("resource: %v", attrs)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestExporters(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"console", "otlp"} {
		tr, err := New(context.Background(), Options{Exporter: name})
		if err != nil || tr.TracerProvider() == nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatalf("%s shutdown: %v", name, err)
		}
	}
	if _, err := New(context.Background(), Options{Exporter: "zipkin"}); err == nil || !strings.Contains(err.Error(), "zipkin") {
		t.Fatalf("unknown exporter: %v", err)
	}
}
