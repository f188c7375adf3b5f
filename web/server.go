// Package web owns the HTTP front: the Huma API (OpenAPI 3.1) on chi, auth,
// health, metrics and the request middleware every route shares.
package web

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/metrics"
	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/jobs"
)

// Options are the server's dependencies. Zero values mean defaults where a
// default exists.
type Options struct {
	Pool     *pgxpool.Pool
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Version  string
	// PublicAPI serves the /v1 user API (role web). Without it only health,
	// metrics and the OpenAPI document are served (worker-only replicas).
	PublicAPI bool

	// JWTSecret signs access tokens (HS256).
	JWTSecret []byte
	// BcryptCost of password hashes; default bcrypt.DefaultCost.
	BcryptCost int
	// PasswordConcurrency bounds the bcrypt hashes and checks this replica
	// runs at once; default the number of CPUs (accounts.Passwords).
	PasswordConcurrency int
	// PasswordWait is how long a password check waits for a free slot
	// before a 503; default accounts.DefaultHashWait.
	PasswordWait time.Duration
	// Registration is who may register (default open); in invite mode
	// Invites redeems the invite tokens, and without it every
	// registration is refused.
	Registration accounts.Registration
	Invites      accounts.InviteRedeemer
	// PublicURL is where people reach this service (scheme://host[:port]),
	// for the links in password reset mail and answers.
	PublicURL string
	// Mailer sends password reset links (POST /v1/auth/forgot); nil: the
	// route answers as always and logs that mail is not configured.
	Mailer Mailer
	// RateLimits of the API, counted in Pool for the whole cluster.
	RateLimits RateLimits
	// Quotas of every project (zero fields: the defaults); Rooms enforces
	// its own.
	Quotas quota.Limits
	// BodyReadTimeout is how long a request's body may take to arrive after
	// its headers, on every route; default DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// TracerProvider traces every request (a span named after its route);
	// nil, tracing off, installs nothing.
	TracerProvider trace.TracerProvider
	// AllowedOrigins may call the API from a browser (CORS): listed origins
	// with credentials, "*" any origin without; none: no cross-origin call.
	AllowedOrigins []string

	// Realtime: with all four set (role web) the ticket, WebSocket, event
	// and RPC routes are served. The realtime package provides them.
	Tickets TicketStore
	Sockets SocketHub
	Events  EventPublisher
	RPC     RPCCaller
	// History serves GET /v1/history (stored events of a stream); nil
	// leaves it out.
	History HistoryReader

	// River inserts the jobs of manual task runs (InsertTx).
	River *river.Client[pgx.Tx]
	// WebhookAllowPrivate accepts webhook URLs on private addresses.
	WebhookAllowPrivate bool
	// TasksChanged is called after a task is created, changed or deleted
	// (wakes this node's claim loop); optional.
	TasksChanged func()
	// RiverUI is the River UI handler, served at /riverui/ to admins only;
	// nil serves nothing there.
	RiverUI http.Handler
	// RunAnnouncer announces the runs a call made or changed (a trigger, a
	// retry, a cancel, a backfill) to their owner; nil announces nothing.
	RunAnnouncer *jobs.Announcer

	// Rooms serves /v1/rooms and is asked wherever a room is used
	// (events, history, presence, tasks' publish actions); nil: no room
	// routes, every room is open.
	Rooms RoomStore

	// Cluster serves the operator routes (status, disconnect, drain) and
	// the node-to-node routes under cluster.InternalPrefix, and readiness
	// fails while it drains; Presence serves GET /v1/presence; nil leaves
	// them out.
	Cluster  clusterOperator
	Presence presenceReader

	// ReadyChecks are further conditions of readiness, after Postgres and
	// the cluster's drain (the LISTEN connection, the hub not draining).
	ReadyChecks []ReadyCheck

	// everyRoute registers every route group whatever is set above: the
	// document of a full web replica, built by Spec without a database.
	everyRoute bool
}

// Server is the HTTP handler of one replica.
type Server struct {
	opts   Options
	router chi.Router
	api    huma.API
	tokens tokens
	limits limits
	// passwords hashes and checks passwords, bounded per replica;
	// registrar applies the registration policy.
	passwords *accounts.Passwords
	registrar accounts.Registrar
	// resetMail sends forgot-password mail after the answer.
	resetMail *resetMailer

	checks   []ReadyCheck // readiness, in order
	readyLog readyLog     // when a failing readiness is logged

	basicCache *basicAuthCache
	// idemWait overrides idempotencyWait (tests).
	idemWait     time.Duration
	idemOutcomes *prometheus.CounterVec
}

// New builds the router, the API and every route.
func New(opts Options) *Server {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	s := &Server{opts: opts, tokens: tokens{secret: opts.JWTSecret},
		passwords: accounts.NewPasswords(accounts.PasswordOptions{Cost: opts.BcryptCost, Concurrency: opts.PasswordConcurrency, Wait: opts.PasswordWait}),
		registrar: accounts.Registrar{Policy: cmp.Or(opts.Registration, accounts.RegistrationOpen), Invites: opts.Invites},
	}

	s.buildLimits()
	s.resetMail = s.newResetMailer()
	s.registerPasswordMetrics()
	s.idemOutcomes = newIdempotencyOutcomes(opts.Registry)

	r := chi.NewRouter()
	bodyTimeout := cmp.Or(opts.BodyReadTimeout, DefaultBodyReadTimeout)
	if opts.TracerProvider != nil {
		r.Use(traceRequests(opts.TracerProvider))
	}
	r.Use(bodyDeadline(bodyTimeout), requestID, clientIPs(opts.RateLimits.TrustedProxies, opts.RateLimits.ClientIPHeader, opts.Logger),
		newRequestMetrics(opts.Registry).middleware, requestLogger(opts.Logger), recoverer(opts.Logger),
		corsHandler(opts.AllowedOrigins))
	if opts.PublicAPI {
		r.Use(s.consoleBridge)
	}
	r.Use(middleware.GetHead) // HEAD answers as GET where no HEAD route exists (uptime checkers)
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed(r))
	r.Handle("/metrics", metrics.Handler(opts.Registry))

	cfg := huma.DefaultConfig("Switchboard", cmp.Or(opts.Version, "dev"))
	cfg.Info.Description = "Scheduled and on-demand jobs, realtime messages over WebSockets, one system from any node."
	cfg.CreateHooks = nil // no $schema links in bodies: the contract is docs/api.md
	cfg.DocsPath = ""     // Huma's page loads its UI from a CDN: mountDocs serves one offline
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", BearerFormat: "JWT or sbk_ API key",
			Description: "A user token from /v1/auth/login or /v1/auth/register (JWT, 24 h), or an API key (sbk_…) from POST /v1/api-keys."},
	}
	cfg.OnAddOperation = append(cfg.OnAddOperation, documentRateLimits, documentQuotas, documentCommonProblems, capAuthBodies, bodyReadTimeout(bodyTimeout), documentIdempotency)
	cfg.Transformers = append(cfg.Transformers, boundProblem)
	describeAPI(&cfg)
	api := humachi.New(r, cfg)
	api.UseMiddleware(s.limitAuth, s.authenticate, s.limitUser, s.checkAccount, s.checkScopes, s.refuseUnknownQuery, s.requireAdmin, s.requireProjectRole, s.idempotent)
	s.router, s.api = r, api

	s.mountDocs()
	s.checks = s.readyChecks()
	if opts.Cluster != nil {
		r.Mount(cluster.InternalPrefix, opts.Cluster.Handler())
	}
	registerHealth(api, s)
	registerReadyGauge(opts.Registry, s)
	if opts.PublicAPI {
		registerAuth(api, s)
		registerSessions(api, s)
		registerResets(api, s)
		registerTasks(api, s)
		registerRuns(api, s)
		registerAPIKeys(api, s)
		registerProjects(api, s)
		registerInvites(api, s)
		if opts.everyRoute || opts.Tickets != nil && opts.Sockets != nil && opts.Events != nil && opts.RPC != nil {
			registerRealtime(api, s)
			registerEvents(api, s)
			registerRPC(api, s)
		}
		if opts.everyRoute || opts.History != nil {
			registerHistory(api, s)
		}
		if opts.everyRoute || opts.Rooms != nil {
			registerRooms(api, s)
		}
		registerAdmin(api, s)
		if opts.everyRoute || opts.Cluster != nil {
			registerCluster(api, s)
		}
		if opts.everyRoute || opts.Presence != nil {
			registerPresence(api, s)
		}
	}
	if opts.RiverUI != nil {
		s.mountRiverUI(opts.RiverUI)
	}
	if opts.PublicAPI {
		s.mountConsole()
	}
	return s
}

// ServeHTTP makes the Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// API exposes the Huma API so other packages' routes land in the same
// OpenAPI document.
func (s *Server) API() huma.API { return s.api }

// Router exposes the chi router for non-JSON routes (WebSocket upgrade, UI).
func (s *Server) Router() chi.Router { return s.router }

// bearer marks an operation as needing a valid access token.
var bearer = []map[string][]string{{"bearer": {}}}

func (s *Server) pingPostgres(ctx context.Context) error {
	return s.opts.Pool.Ping(ctx)
}
