package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// clusterStatus is docs/api.md's GET /v1/cluster/status.
type clusterStatus struct {
	Nodes []struct {
		ID             string    `json:"id"`
		Name           string    `json:"name"`
		Addr           string    `json:"addr"`
		StartedAt      time.Time `json:"started_at"`
		HeartbeatAgeMS int64     `json:"heartbeat_age_ms"`
		Reachable      bool      `json:"reachable"`
		Draining       bool      `json:"draining"`
		WSConnections  int       `json:"ws_connections"`
		JobsRunning    int       `json:"jobs_running"`
	} `json:"nodes"`
	Degraded bool `json:"degraded"`
}

func (h *harness) clusterStatus(ctx context.Context, r int) (*clusterStatus, time.Duration, error) {
	var st clusterStatus
	began := time.Now()
	err := h.expect(ctx, r, http.MethodGet, "/v1/cluster/status", h.users["admin"].Token, nil, http.StatusOK, &st)
	return &st, time.Since(began), err
}

// liveAt reports whether the status lists a reachable node advertising addr
// that started after since.
func (st *clusterStatus) liveAt(addr string, since time.Time) bool {
	for _, n := range st.Nodes {
		if n.Addr == addr && n.Reachable && !n.StartedAt.Before(since.Add(-time.Second)) {
			return true
		}
	}
	return false
}

// checkClusterStatus: every replica answers for the whole cluster — three
// reachable nodes at our three addresses, not degraded — and a non-admin is
// refused.
func (h *harness) checkClusterStatus(ctx context.Context) (figures, error) {
	var f figures
	var errs []error
	var slowest time.Duration
	for i := range h.cl.replicas {
		st, took, err := h.clusterStatus(ctx, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		slowest = max(slowest, took)
		live := 0
		for _, r := range h.cl.replicas {
			if st.liveAt(r.Addr(), h.started) {
				live++
			}
		}
		f.add(fmt.Sprintf("r%d_sees", i+1), live)
		if live != len(h.cl.replicas) || st.Degraded {
			errs = append(errs, fmt.Errorf("r%d lists %d of %d replicas reachable (nodes %d, degraded %v)", i+1, live, len(h.cl.replicas), len(st.Nodes), st.Degraded))
		}
	}
	f.add("slowest", slowest)
	resp, err := h.call(ctx, 0, http.MethodGet, "/v1/cluster/status", h.users["alice"].Token, nil)
	if err == nil {
		f.add("non_admin", resp.Status)
		if resp.Status != http.StatusForbidden && resp.Status != http.StatusUnauthorized {
			errs = append(errs, fmt.Errorf("a non-admin got %d from /v1/cluster/status", resp.Status))
		}
	}
	return f, errors.Join(errs...)
}

// waitRejoined polls the status on replica r until addr is listed live.
func (h *harness) waitRejoined(ctx context.Context, r int, addr string, since time.Time, d time.Duration) (time.Duration, error) {
	began := time.Now()
	var last error
	for time.Since(began) < d {
		st, _, err := h.clusterStatus(ctx, r)
		if err == nil && st.liveAt(addr, since) {
			return time.Since(began), nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("%s not listed as reachable (nodes %d)", addr, len(st.Nodes))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("not rejoined within %s: %w", d, last)
}
