package web

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
)

type ctxKey int

const requestIDKey ctxKey = iota

// requestID takes a sane X-Request-ID from the client or makes one, and
// echoes it in the response.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if id == "" || len(id) > 128 {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r.WithContext(contextWithRequestID(r.Context(), id)))
	})
}

// statusRecorder captures what a handler wrote, for logs and metrics. It
// passes Flush and Hijack (WebSocket upgrades) through.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection to a WebSocket upgrade (gorilla asserts
// http.Hijacker directly); the request is then logged as 101.
func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("response writer cannot hijack the connection")
	}
	conn, rw, err := h.Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

func (w *statusRecorder) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func recorderOf(w http.ResponseWriter) *statusRecorder {
	if rec, ok := w.(*statusRecorder); ok {
		return rec
	}
	return &statusRecorder{ResponseWriter: w}
}

type requestMetrics struct {
	duration *prometheus.HistogramVec
}

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	m := &requestMetrics{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "switchboard_http_request_duration_seconds",
		Help:    "HTTP request duration by route pattern, method and status.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route", "method", "status"})}
	reg.MustRegister(m.duration)
	return m
}

func (m *requestMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := recorderOf(w)
		next.ServeHTTP(rec, r)
		m.duration.WithLabelValues(routePattern(r), r.Method, strconv.Itoa(rec.code())).Observe(time.Since(start).Seconds())
	})
}

// routePattern is the matched chi pattern; unmatched paths share one label so
// scanners cannot blow up the metric's cardinality.
func routePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// requestLogger writes one structured line per request: at debug, a 503 at
// warn, another 5xx at error.
func requestLogger(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := recorderOf(w)
			next.ServeHTTP(rec, r)
			level := slog.LevelDebug
			switch {
			case rec.code() == http.StatusServiceUnavailable:
				// Readiness during drain or a database outage: expected,
				// and probes would flood the error log.
				level = slog.LevelWarn
			case rec.code() >= 500:
				level = slog.LevelError
			}
			logger.LogAttrs(r.Context(), level, "request",
				slog.String("request_id", requestIDFrom(r.Context())),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("route", routePattern(r)),
				slog.Int("status", rec.code()),
				slog.Int("bytes", rec.bytes),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
				slog.String("remote_addr", r.RemoteAddr),
				slog.String("client_ip", clientAddr(r.Context(), r.RemoteAddr)),
			)
		})
	}
}

// recoverer turns a panic into a 500 problem+json; the panic and its stack
// go to the log, never to the client.
func recoverer(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil || v == http.ErrAbortHandler {
					if v != nil {
						panic(v)
					}
					return
				}
				logger.Error("panic serving request", "request_id", requestIDFrom(r.Context()), "panic", v, "stack", string(debug.Stack()))
				writeProblem(w, http.StatusInternalServerError, "internal error; the request id is "+requestIDFrom(r.Context()))
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// writeProblem writes an RFC 9457 body outside Huma (middleware, raw routes).
func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"title":  http.StatusText(status),
		"status": status,
		"detail": detail,
	})
}

func contextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}
