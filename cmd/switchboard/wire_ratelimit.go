package main

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/workers"
)

func (a *app) authRate() ratelimit.Rate {
	return ratelimit.Rate{PerSecond: a.cfg.AuthRate, Burst: a.cfg.AuthBurst}
}

func (a *app) userRate() ratelimit.Rate {
	return ratelimit.Rate{PerSecond: a.cfg.UserRate, Burst: a.cfg.UserBurst}
}

func (a *app) apiKeyRate() ratelimit.Rate {
	if a.cfg.APIKeyRate == 0 || a.cfg.APIKeyBurst == 0 {
		return web.DefaultAPIKeyRate
	}
	return ratelimit.Rate{PerSecond: a.cfg.APIKeyRate, Burst: a.cfg.APIKeyBurst}
}

// rateLimits are the API's limits as configured.
func (a *app) rateLimits() web.RateLimits {
	return web.RateLimits{
		Auth: a.authRate(), User: a.userRate(), APIKey: a.apiKeyRate(),
		TrustedProxies: a.cfg.TrustedProxies, ClientIPHeader: a.cfg.ClientIPHeader,
		Timeout: a.cfg.RateLimitTimeout,
	}
}

// rateLimitPrune deletes rate limit windows no decision reads any more.
func (a *app) rateLimitPrune() workers.MaintenanceTask {
	keep := ratelimit.Retention(a.authRate(), a.userRate(), a.apiKeyRate())
	return workers.MaintenanceTask{
		Name: "ratelimit_prune", Every: time.Minute,
		Run: func(ctx context.Context) (int64, error) {
			return ratelimit.Prune(ctx, a.pool, time.Now().Add(-keep))
		},
	}
}

// idempotencyPrune deletes Idempotency-Key records older than their 24 h.
func (a *app) idempotencyPrune() workers.MaintenanceTask {
	return workers.MaintenanceTask{
		Name: "idempotency_prune", Every: 10 * time.Minute,
		Run: func(ctx context.Context) (int64, error) { return web.PruneIdempotencyKeys(ctx, a.pool) },
	}
}
