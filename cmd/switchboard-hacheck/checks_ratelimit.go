package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The contract's default auth limit per client IP.
const (
	authRate  = 5.0
	authBurst = 8
)

// checkRateLimit: /v1/auth/login round robin over the three replicas from
// one client IP is refused (429) after the burst, whichever replica answers;
// a concurrent hammer from another IP gets what one limit allows, not three
// times that; a third IP is unaffected. Each part dials from its own
// loopback address, so the parts and the other checks don't share a key.
func (h *harness) checkRateLimit(ctx context.Context) (figures, error) {
	var f figures
	var errs []error
	carol := h.users["carol"]
	login := map[string]string{"email": carol.Email, "password": "wrong-password-1"}

	hc := httpClient("127.0.0.41")
	first429 := 0
	var limited *response
	for i := range authBurst + 4 {
		resp, err := send(ctx, hc, http.MethodPost, h.cl.replicas[i%3].URL("/v1/auth/login"), "", login)
		if err != nil {
			return f, fmt.Errorf("login %d on r%d: %w", i+1, i%3+1, err)
		}
		if resp.Status == http.StatusTooManyRequests {
			first429, limited = i+1, resp
			break
		}
		if resp.Status != http.StatusUnauthorized {
			errs = append(errs, fmt.Errorf("login %d with a wrong password on r%d: %d, want 401 or 429", i+1, i%3+1, resp.Status))
		}
	}
	f.add("first_429", first429)
	switch {
	case first429 == 0:
		errs = append(errs, fmt.Errorf("no 429 in %d logins round robin over 3 replicas (burst %d): the limit is per replica or off", authBurst+4, authBurst))
	case first429 <= authBurst:
		errs = append(errs, fmt.Errorf("429 at request %d, inside the burst of %d", first429, authBurst))
	default:
		for _, hd := range []string{"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if limited.Header.Get(hd) == "" {
				errs = append(errs, fmt.Errorf("429 without %s", hd))
			}
		}
	}

	allowed, total, err := h.hammer(ctx, "127.0.0.42", login, h.opts.profile.hammer)
	if err != nil {
		errs = append(errs, err)
	}
	secs := h.opts.profile.hammer.Seconds()
	one := float64(authBurst) + authRate*secs
	f.add("hammer_allowed", allowed)
	f.add("hammer_total", total)
	f.add("one_limit", int(math.Round(one)))
	if float64(allowed) > 1.25*one+1 {
		errs = append(errs, fmt.Errorf("%d logins allowed in %.0fs from one IP over 3 replicas; one limit allows ~%.0f (per-replica limits would allow ~%.0f)", allowed, secs, one, 3*one))
	}
	if allowed < authBurst {
		errs = append(errs, fmt.Errorf("only %d logins allowed in %.0fs, under the burst of %d", allowed, secs, authBurst))
	}

	resp, err := send(ctx, httpClient("127.0.0.43"), http.MethodPost, h.cl.replicas[0].URL("/v1/auth/login"), "", login)
	if err != nil {
		errs = append(errs, err)
	} else {
		f.add("other_ip", resp.Status)
		if resp.Status == http.StatusTooManyRequests {
			errs = append(errs, errors.New("another client IP is limited too: the key is not the client IP"))
		}
	}
	return f, errors.Join(errs...)
}

// hammer sends logins from 30 concurrent clients on one IP, round robin over
// the replicas, for d; it returns how many were not refused with 429.
func (h *harness) hammer(ctx context.Context, ip string, body any, d time.Duration) (allowed, total int, err error) {
	hc := httpClient(ip)
	var ok, all atomic.Int64
	var firstErr error
	var once sync.Once
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 30 {
		wg.Go(func() {
			for i := w; time.Now().Before(stop); i++ {
				resp, err := send(ctx, hc, http.MethodPost, h.cl.replicas[i%3].URL("/v1/auth/login"), "", body)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				all.Add(1)
				if resp.Status != http.StatusTooManyRequests {
					ok.Add(1)
				}
				time.Sleep(10 * time.Millisecond) // ~100 req/s per client is plenty
			}
		})
	}
	wg.Wait()
	return int(ok.Load()), int(all.Load()), firstErr
}
