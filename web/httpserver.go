package web

import (
	"cmp"
	"log/slog"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// Connection timeouts of the HTTP server. None of them cuts a WebSocket
// (a hijacked connection is the hub's) or a handler that waits, such as an
// RPC call: they bound only what the client must send.
const (
	// DefaultReadHeaderTimeout is how long a client has to send a
	// request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyReadTimeout is how long it has to send the body after the
	// headers (Options.BodyReadTimeout).
	DefaultBodyReadTimeout = 5 * time.Second
	// DefaultIdleTimeout is how long a kept-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 120 * time.Second
)

// HTTPServerOptions tune NewHTTPServer; zero values mean the defaults.
type HTTPServerOptions struct {
	Logger            *slog.Logger
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
}

// NewHTTPServer is the one http.Server of a replica, serving h (a Server,
// which gives every request body Options.BodyReadTimeout): a client that
// stalls in its headers or idles between requests is cut after the
// timeouts of opts.
func NewHTTPServer(h http.Handler, opts HTTPServerOptions) *http.Server {
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmp.Or(opts.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		IdleTimeout:       cmp.Or(opts.IdleTimeout, DefaultIdleTimeout),
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// bodyDeadline gives a request that has a body d to send all of it, on
// every route: API routes get the same d from Huma (bodyReadTimeout). Once
// the body is read, net/http clears the deadline, so a handler may then wait
// as long as it needs (an RPC call); a request without a body (a WebSocket
// upgrade, any GET) gets no deadline at all. A global ReadTimeout would do
// neither.
func bodyDeadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength != 0 { // sized or chunked
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// bodyReadTimeout is an OnAddOperation hook: Huma sets its own body
// deadline on API routes (5 s by default); it is the server's.
func bodyReadTimeout(d time.Duration) huma.AddOpFunc {
	return func(_ *huma.OpenAPI, op *huma.Operation) { op.BodyReadTimeout = d }
}
