package main

import (
	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/web"
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
