package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/infra/ratelimit"
)

// RateLimits configure the request limits; zero values mean docs/api.md's
// defaults.
type RateLimits struct {
	// Auth limits /v1/auth/* per client IP; default 5/s, burst 8.
	Auth ratelimit.Rate
	// User limits authenticated /v1 routes per account, whatever the
	// credential: its user tokens and all its API keys share it; default
	// 50/s, burst 100.
	User ratelimit.Rate
	// APIKey limits requests made with an API key, per key, as well as the
	// account's User limit; default 50/s, burst 100.
	APIKey ratelimit.Rate
	// TrustedProxies (CIDRs or addresses) are believed about the client's
	// address, in ClientIPHeader: X-Forwarded-For (default) or a one-address
	// header such as Fly-Client-IP.
	TrustedProxies []string
	ClientIPHeader string
	// Timeout of a decision in Postgres before the per-replica fallback
	// decides; default 250 ms.
	Timeout time.Duration
}

var (
	defaultAuthRate = ratelimit.Rate{PerSecond: 5, Burst: 8}
	defaultUserRate = ratelimit.Rate{PerSecond: 50, Burst: 100}
	// DefaultAPIKeyRate is the per-key limit when RateLimits.APIKey is zero.
	DefaultAPIKeyRate = ratelimit.Rate{PerSecond: 50, Burst: 100}
)

// limits are the server's limiters: one store (one Postgres counter, one
// fallback state), a limiter per limit, applied by the Huma middlewares
// limitAuth and limitUser.
//
// Why not httprate's own middleware: httprate v0.16's RateLimiter holds one
// mutex across its counter's Get and IncrementBy, for every key. With the
// counter in Postgres that is a round trip under a process-wide lock: one
// request decided at a time per replica, whatever the key (the benchmark in
// ratelimit_bench_test.go shows it flat at any concurrency). Ours keep
// httprate's algorithm (ratelimit implements it, and its Counter is an
// httprate.LimitCounter), its headers and its arithmetic, but decide under
// no lock of ours: requests on different keys never wait for each other, and
// requests on one key queue on that key alone (on this replica, then on its
// row in Postgres) for one statement, which takes a share of the key's
// window that the next requests are decided from (infra/ratelimit).
type limits struct {
	store              *ratelimit.Store
	auth, user, apiKey *ratelimit.Limiter
	// authSite counts the auth limit per IPv6 /48 as well (siteFactor
	// times it): a client given a /48 holds 65 536 /64s.
	authSite *ratelimit.Limiter
}

// siteFactor is how many times the per-address auth limit one IPv6 /48
// may spend, summed over its /64s.
const siteFactor = 4

func (s *Server) buildLimits() {
	o := s.opts.RateLimits
	var db ratelimit.DB // a nil *pgxpool.Pool would be a non-nil interface
	if s.opts.Pool != nil {
		db = s.opts.Pool
	}
	s.limits.store = ratelimit.NewStore(ratelimit.Options{
		DB: db, Logger: s.opts.Logger.With("component", "ratelimit"),
		Registry: s.opts.Registry, Timeout: o.Timeout,
	})
	auth := cmp.Or(o.Auth, defaultAuthRate)
	s.limits.auth = s.limits.store.Limiter("auth", auth)
	s.limits.authSite = s.limits.store.Limiter("auth48", ratelimit.Rate{PerSecond: auth.PerSecond * siteFactor, Burst: auth.Burst * siteFactor})
	s.limits.user = s.limits.store.Limiter("user", cmp.Or(o.User, defaultUserRate))
	s.limits.apiKey = s.limits.store.Limiter("apikey", cmp.Or(o.APIKey, DefaultAPIKeyRate))
}

// limitAuth limits /v1/auth/* per client address (allowAuth).
func (s *Server) limitAuth(ctx huma.Context, next func(huma.Context)) {
	if !strings.HasPrefix(ctx.Operation().Path, "/v1/auth/") {
		next(ctx)
		return
	}
	d := s.allowAuth(ctx.Context(), ctx.RemoteAddr())
	setRateHeaders(ctx.SetHeader, d)
	if d.Allowed {
		next(ctx)
		return
	}
	_ = huma.WriteErr(s.api, ctx, http.StatusTooManyRequests, tooManyDetail(d, "from this address"))
}

// allowAuth decides a request that may guess a password (the auth routes,
// the console's sign-in, River UI basic auth): per client address (IPv6
// per /64) and, for IPv6, per /48 with siteFactor times the limit. The
// answer is the refusing decision, else the per-address one.
func (s *Server) allowAuth(ctx context.Context, remoteAddr string) ratelimit.Decision {
	d := s.limits.auth.Allow(ctx, clientIP(ctx, remoteAddr))
	site, ok := clientSite(ctx, remoteAddr)
	if !d.Allowed || !ok {
		return d
	}
	if sd := s.limits.authSite.Allow(ctx, site); !sd.Allowed {
		return sd
	}
	return d
}

// limitUser limits authenticated operations per account: a user token's
// requests and those of every API key the account made draw from one
// budget (the User limit, keyed by the account), so keys cannot multiply
// it. A key's requests also spend the key's own bucket (the APIKey limit).
// It runs after authenticate, which put the principal in the context.
func (s *Server) limitUser(ctx huma.Context, next func(huma.Context)) {
	p, ok := ctx.Context().Value(principalKey{}).(Principal)
	if !ok {
		next(ctx)
		return
	}
	d, who := s.allowUser(ctx.Context(), p)
	setRateHeaders(ctx.SetHeader, d)
	if d.Allowed {
		next(ctx)
		return
	}
	_ = huma.WriteErr(s.api, ctx, http.StatusTooManyRequests, tooManyDetail(d, who))
}

// allowUser decides a request of p: the key's bucket first (a key over its
// own limit spends nothing of its account's), then the account's. The
// answer is the refusing decision and whose it is, else the decision with
// less remaining.
func (s *Server) allowUser(ctx context.Context, p Principal) (ratelimit.Decision, string) {
	var key ratelimit.Decision
	if p.KeyID != "" {
		if key = s.limits.apiKey.Allow(ctx, p.KeyID); !key.Allowed {
			return key, "for this API key"
		}
	}
	d := s.limits.user.Allow(ctx, p.UserID)
	switch {
	case !d.Allowed:
		return d, "for this account (its user tokens and API keys together)"
	case p.KeyID != "" && key.Remaining < d.Remaining:
		return key, ""
	}
	return d, ""
}

func tooManyDetail(d ratelimit.Decision, who string) string {
	return fmt.Sprintf("too many requests %s: at most %d per %s; retry in %d s",
		who, d.Limit, d.Window, int(d.RetryAfter.Seconds()))
}

// setRateHeaders writes httprate's headers: the limit, what remains of it,
// when the window ends (Unix seconds, rounded up: windows need not end on a
// second), and on refusal Retry-After.
func setRateHeaders(set func(name, value string), d ratelimit.Decision) {
	set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
	set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
	set("X-RateLimit-Reset", strconv.FormatInt(d.Reset.Add(time.Second-1).Unix(), 10)) // rounded up
	if !d.Allowed {
		set("Retry-After", strconv.Itoa(int(d.RetryAfter.Seconds())))
	}
}

// documentRateLimits adds the 429 answer to the OpenAPI operations the
// limits apply to, for operations registered anywhere (it is an
// OnAddOperation hook).
func documentRateLimits(_ *huma.OpenAPI, op *huma.Operation) {
	if (len(op.Security) == 0 && !strings.HasPrefix(op.Path, "/v1/auth/")) || op.Responses == nil {
		return
	}
	if _, ok := op.Responses["429"]; ok {
		return
	}
	problem := problemResponse(op)
	if problem == nil {
		return // only a default error answer, which covers 429 too
	}
	integer := func(doc string) *huma.Param {
		return &huma.Param{Description: doc, Schema: &huma.Schema{Type: huma.TypeInteger}}
	}
	op.Responses["429"] = &huma.Response{
		Description: http.StatusText(http.StatusTooManyRequests),
		Content:     problem.Content,
		Headers: map[string]*huma.Param{
			"Retry-After":           integer("seconds until a request would be allowed"),
			"X-RateLimit-Limit":     integer("requests allowed per window"),
			"X-RateLimit-Remaining": integer("requests left in the window"),
			"X-RateLimit-Reset":     integer("end of the window, Unix seconds"),
		},
	}
}
