package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/logging"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// lockedBuffer collects a replica's log lines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines are the JSON log lines whose msg is msg.
func (b *lockedBuffer) lines(msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}

// startTracedServer is startServer with tracing on, spans going to exp,
// and JSON logs (debug level) going to logs.
func startTracedServer(t *testing.T, cfg config.Config, exp *tracetest.InMemoryExporter, logs *lockedBuffer) *testServer {
	t.Helper()
	cfg.WebhookPrivate = true // the target is a local httptest server
	ctx := context.Background()
	a, err := newAppWith(ctx, cfg, logging.New(logs, "json", "debug"), appOptions{spanExporter: exp})
	if err != nil {
		t.Fatalf("new app: %v", err)
	}
	if err := a.Start(ctx); err != nil {
		a.Stop()
		t.Fatalf("start app: %v", err)
	}
	t.Cleanup(a.Stop)
	return &testServer{app: a, URL: "http://" + a.Addr()}
}

// TestTraceFromRequestToWebhookAndSocket: one trace from POST
// /v1/tasks/{id}/runs on a web replica through the River job it queued,
// worked on a worker replica (the trace context travels in the job's
// metadata), to the traceparent the webhook target receives and the
// task.run.succeeded publish, each span the child of the step that caused
// it; the request log and the job's log carry the trace id.
func TestTraceFromRequestToWebhookAndSocket(t *testing.T) {
	t.Parallel()
	exp, logs := tracetest.NewInMemoryExporter(), &lockedBuffer{}
	dbURL := dbtest.NewDatabaseURL(t)
	webCfg, workerCfg := testConfig(t, dbURL), testConfig(t, dbURL)
	webCfg.Roles, workerCfg.Roles = []string{config.RoleWeb}, []string{config.RoleWorker}
	srv := startTracedServer(t, webCfg, exp, logs)
	worker := startTracedServer(t, workerCfg, exp, logs)
	received := make(chan string, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { received <- r.Header.Get("traceparent") }))
	defer hook.Close()

	token, _ := registerUser(t, srv, "traced@example.com")
	id := createTask(t, srv.URL, token, map[string]any{
		"name": "traced", "schedule": "@daily", "action": map[string]any{"type": "webhook", "url": hook.URL + "/hook"},
	})
	status, run := call(t, http.MethodPost, srv.URL+"/v1/tasks/"+id+"/runs", nil, token)
	if status != http.StatusAccepted {
		t.Fatalf("trigger: %d %v", status, run)
	}
	var traceparent string
	select {
	case traceparent = <-received:
	case <-time.After(15 * time.Second):
		t.Fatal("the webhook was not called")
	}

	byName := map[string]tracetest.SpanStub{}
	// The job's span ends when Work returns, after the run's last publish.
	testwait.For(t, 15*time.Second, "the task.run.succeeded publish span and the job's span", func() bool {
		request, ok := spanNamed(exp, "POST /v1/tasks/{id}/runs")
		if !ok {
			return false
		}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == request.SpanContext.TraceID() {
				byName[s.Name] = s
			}
		}
		_, published := byName["realtime.publish task.run.succeeded"]
		_, worked := byName["river.work/task_run"]
		return published && worked
	})
	request := byName["POST /v1/tasks/{id}/runs"]
	for child, parent := range map[string]string{
		"river.insert_many":                   "POST /v1/tasks/{id}/runs",
		"realtime.publish task.run.queued":    "POST /v1/tasks/{id}/runs",
		"river.work/task_run":                 "river.insert_many",
		"realtime.publish task.run.running":   "river.work/task_run",
		"webhook POST":                        "river.work/task_run",
		"realtime.publish task.run.succeeded": "river.work/task_run",
	} {
		c, ok := byName[child]
		if !ok {
			t.Errorf("no %q span in the request's trace; spans: %v", child, names(byName))
			continue
		}
		if c.Parent.SpanID() != byName[parent].SpanContext.SpanID() {
			t.Errorf("%q: parent %s, want %q (%s)", child, c.Parent.SpanID(), parent, byName[parent].SpanContext.SpanID())
		}
	}
	if request.SpanKind != trace.SpanKindServer || request.Parent.IsValid() {
		t.Errorf("request span: kind %v, parent %v", request.SpanKind, request.Parent)
	}
	want := "00-" + request.SpanContext.TraceID().String() + "-" + byName["webhook POST"].SpanContext.SpanID().String() + "-01"
	if traceparent != want {
		t.Errorf("the target received traceparent %q, want %q", traceparent, want)
	}

	for span, owner := range map[string]*testServer{"POST /v1/tasks/{id}/runs": srv, "river.work/task_run": worker} {
		if got, _ := byName[span].Resource.Set().Value("service.instance.id"); got.AsString() != owner.nodeID {
			t.Errorf("%q was recorded by node %q, want %q", span, got.AsString(), owner.nodeID)
		}
	}
	node := func(s *testServer) string { return s.nodeID[:8] }
	requireLogged(t, logs, "request", func(l map[string]any) bool {
		return l["route"] == "/v1/tasks/{id}/runs" && l["node_id"] == node(srv)
	}, request)
	requireLogged(t, logs, "run attempt recorded", func(l map[string]any) bool {
		return l["status"] == "succeeded" && l["node_id"] == node(worker)
	}, byName["river.work/task_run"])
}

// spanNamed finds an ended span by name.
func spanNamed(exp *tracetest.InMemoryExporter, name string) (tracetest.SpanStub, bool) {
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

func names(spans map[string]tracetest.SpanStub) []string {
	var out []string
	for n := range spans {
		out = append(out, n)
	}
	return out
}

// requireLogged: a log line msg that match selects carries span's trace
// and span ids.
func requireLogged(t *testing.T, logs *lockedBuffer, msg string, match func(map[string]any) bool, span tracetest.SpanStub) {
	t.Helper()
	var seen []map[string]any
	for _, l := range logs.lines(msg) {
		if !match(l) {
			continue
		}
		if l["trace_id"] == span.SpanContext.TraceID().String() && l["span_id"] == span.SpanContext.SpanID().String() {
			return
		}
		seen = append(seen, l)
	}
	t.Errorf("no %q line with trace_id %s span_id %s; lines: %v", msg, span.SpanContext.TraceID(), span.SpanContext.SpanID(), seen)
}

// TestTracingOffByDefault: with no OTEL_* variable nothing is traced: a
// caller's traceparent is not continued (no trace id in the request log)
// and the webhook target receives none.
func TestTracingOffByDefault(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.WebhookPrivate = true
	a, err := newApp(context.Background(), cfg, logging.New(logs, "json", "info"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		a.Stop()
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	srv := &testServer{app: a, URL: "http://" + a.Addr()}
	if a.tracing.TracerProvider() != nil {
		t.Fatal("a tracer provider was built without any OTEL_* variable")
	}
	received := make(chan http.Header, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { received <- r.Header.Clone() }))
	defer hook.Close()
	token, _ := registerUser(t, srv, "untraced@example.com")
	id := createTask(t, srv.URL, token, map[string]any{
		"name": "untraced", "schedule": "@daily", "action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tasks/"+id+"/runs", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	select {
	case h := <-received:
		if v := h.Get("traceparent"); v != "" {
			t.Errorf("the target received traceparent %q", v)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the webhook was not called")
	}
	for _, l := range logs.lines("request") {
		if _, ok := l["trace_id"]; ok {
			t.Errorf("request logged with a trace id: %v", l)
		}
	}
}

// TestOTLPExportFromTheEnvironment: the binary with only
// OTEL_EXPORTER_OTLP_ENDPOINT (and a service name) set exports its spans
// over OTLP/HTTP to that collector, the last ones at SIGTERM.
func TestOTLPExportFromTheEnvironment(t *testing.T) {
	t.Parallel()
	type export struct {
		path, contentType string
		body              []byte
	}
	var mu sync.Mutex
	var exports []export
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		exports = append(exports, export{r.URL.Path, r.Header.Get("Content-Type"), body})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	p := startProcess(t, dbtest.NewDatabaseURL(t), "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_SERVICE_NAME=switchboard-otlp-test")
	if status, body := call(t, http.MethodPost, p.URL+"/v1/auth/register",
		map[string]string{"email": "otlp@example.com", "password": "correct horse"}, ""); status != http.StatusCreated {
		t.Fatalf("register: %d %v", status, body)
	}
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var all []byte
	for _, e := range exports {
		if e.path != "/v1/traces" || e.contentType != "application/x-protobuf" {
			t.Errorf("export to %s as %s", e.path, e.contentType)
		}
		all = append(all, e.body...)
	}
	for _, want := range []string{"switchboard-otlp-test", "POST /v1/auth/register"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("the collector received no span with %q (%d exports)", want, len(exports))
		}
	}
}
