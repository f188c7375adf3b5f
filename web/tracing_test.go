package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/realtime"
)

// TestTracedRequests: with a tracer provider every request but probes and
// scrapes gets a server span named after its route pattern, continuing a
// caller's traceparent; body deadlines and WebSocket upgrades work through
// the tracing middleware's response writer.
func TestTracedRequests(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	b := setupEveryRoute(t, shortBodies, func(o *Options) { o.TracerProvider = tp })
	b.server.Router().Post("/plain", readsBody)
	addr := serveWithTimeouts(t, b.server)
	get := func(path string, header http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	get("/v1/runs/0b6a1c2e-8a4f-4d3e-9a55-2f1d1f0e8c11", http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	get("/healthz/live", nil)
	get("/healthz/ready", nil)
	get("/metrics", nil)
	get("/no/such/path", nil)
	cutAfter(t, addr, "POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")

	token, id := b.register(t, "traced-socket@example.com")
	res := b.do(t, http.MethodPost, "/v1/ws/ticket", nil, token)
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/v1/ws?ticket="+res.body["ticket"].(string), nil)
	if err != nil {
		t.Fatalf("a WebSocket through the tracing middleware: %v", err)
	}
	defer conn.Close()
	if ev := b.do(t, http.MethodPost, "/v1/events", map[string]any{"to": id, "event": "traced", "payload": 1}, token); ev.status != http.StatusAccepted {
		t.Fatalf("publish: %d %s", ev.status, ev.raw)
	}
	_ = conn.SetReadDeadline(time.Now().Add(safety))
	var f realtime.Frame
	if err := conn.ReadJSON(&f); err != nil || f.Event != "traced" {
		t.Fatalf("socket: %v %+v", err, f)
	}

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
		if strings.Contains(s.Name, "/healthz") || strings.Contains(s.Name, "/metrics") {
			t.Errorf("probe or scrape traced: %s", s.Name)
		}
	}
	run, ok := spans["GET /v1/runs/{id}"]
	switch {
	case !ok:
		t.Fatalf("no span named after the route; spans: %v", keys(spans))
	case run.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || run.Parent.SpanID().String() != "00f067aa0ba902b7":
		t.Errorf("the caller's traceparent was not continued: trace %s parent %s", run.SpanContext.TraceID(), run.Parent.SpanID())
	case run.SpanKind != trace.SpanKindServer:
		t.Errorf("kind %v", run.SpanKind)
	}
	for _, name := range []string{"GET", "POST /plain", "POST /v1/ws/ticket", "POST /v1/events"} {
		if _, ok := spans[name]; !ok {
			t.Errorf("no span %q; spans: %v", name, keys(spans))
		}
	}
}

func keys(m map[string]tracetest.SpanStub) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
