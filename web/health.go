package web

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/db"
)

// ReadyCheck is one condition of readiness (Postgres answers, the node is
// not draining, the LISTEN connection is up): Check's error, prefixed
// with Name, is the reason readiness fails.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// readyChecks are the server's conditions of readiness, in order (the
// first failure is the reported reason): Postgres, the cluster's drain,
// then Options.ReadyChecks.
func (s *Server) readyChecks() []ReadyCheck {
	checks := []ReadyCheck{{"postgres", s.pingPostgres}}
	if s.opts.Cluster != nil {
		checks = append(checks, ReadyCheck{"draining", s.opts.Cluster.ReadyCheck})
	}
	return append(checks, s.opts.ReadyChecks...)
}

type healthBody struct {
	Status string `json:"status" enum:"ok,unavailable" doc:"ok, or unavailable with a reason"`
	Reason string `json:"reason,omitempty" doc:"why the node is not ready"`
}

type healthOutput struct {
	Status int
	Body   healthBody
}

// headersTooLarge is net/http's answer, before any route, to request headers
// over its 1 MiB limit (http.DefaultMaxHeaderBytes).
var headersTooLarge = &huma.Response{Description: "Request Header Fields Too Large: headers over 1 MiB, refused by the HTTP server before any route"}

func registerHealth(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "health-live", Method: http.MethodGet, Path: "/healthz/live",
		Summary: "Liveness: 200 while the process runs", Tags: []string{"Service"}, Security: public,
		Description: "Answers 200 as long as the process serves HTTP, without touching Postgres: restart the replica when it does not.",
		Responses:   map[string]*huma.Response{"431": headersTooLarge},
	}, func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		return &healthOutput{Status: http.StatusOK, Body: healthBody{Status: "ok"}}, nil
	})
	huma.Register(api, huma.Operation{
		OperationID: "health-ready", Method: http.MethodGet, Path: "/healthz/ready",
		Summary:     "Readiness: Postgres answers within 2 s, LISTEN is up, not draining",
		Description: "200 when this replica can take traffic; 503 with the reason while Postgres does not answer, the LISTEN connection is down or the node is draining.",
		Tags:        []string{"Service"}, Security: public,
		Responses: map[string]*huma.Response{
			"431": headersTooLarge,
			"503": {Description: "Not ready", Content: map[string]*huma.MediaType{
				"application/json": {Schema: api.OpenAPI().Components.Schemas.Schema(reflectType[healthBody](), true, "")},
			}},
		},
	}, func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		if reason := s.notReady(ctx); reason != "" {
			return &healthOutput{Status: http.StatusServiceUnavailable, Body: healthBody{Status: "unavailable", Reason: reason}}, nil
		}
		return &healthOutput{Status: http.StatusOK, Body: healthBody{Status: "ok"}}, nil
	})
}

// notReady returns why the node is not ready, or "".
func (s *Server) notReady(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, c := range s.checks {
		if err := c.Check(ctx); err != nil {
			reason := c.Name + ": " + readyReason(err)
			if s.readyLog.due(reason, time.Now()) {
				s.opts.Logger.WarnContext(ctx, "not ready", "check", c.Name, "error", err)
			}
			return reason
		}
	}
	s.readyLog.due("", time.Now())
	return ""
}

// readyLog decides when a failing readiness is logged: when its reason
// changes, and once a minute while it lasts. Readiness is asked at every
// probe and every /metrics scrape (switchboard_ready); a warning each time
// would bury the rest of the log.
type readyLog struct {
	mu     sync.Mutex
	reason string
	at     time.Time
}

// due records reason ("" when ready) and reports whether to log it.
func (l *readyLog) due(reason string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if reason == "" || (reason == l.reason && now.Sub(l.at) < time.Minute) {
		l.reason = reason
		return false
	}
	l.reason, l.at = reason, now
	return true
}

// readyReason says why a check failed without the error's text, which may
// name the database's user, host and port (readiness answers anyone); the
// error itself is logged.
func readyReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within 2 s"
	case db.Transient(err):
		return "the database is unreachable"
	}
	return "not ready (the replica's log has the cause)"
}

// registerReadyGauge exports readiness as switchboard_ready, evaluated at
// each scrape with the checks /healthz/ready runs, so alerts see a replica
// that serves /metrics but would not take traffic.
func registerReadyGauge(reg prometheus.Registerer, s *Server) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_ready",
		Help: "1 when this replica is ready (GET /healthz/ready answers 200), 0 while Postgres does not answer, LISTEN is down or it drains.",
	}, func() float64 {
		if s.notReady(context.Background()) != "" {
			return 0
		}
		return 1
	}))
}
