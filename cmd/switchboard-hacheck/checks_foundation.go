package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// checkClusterUp: every replica is live and ready, and a token issued by one
// replica is accepted by all (one JWT secret, one user table).
func (h *harness) checkClusterUp(ctx context.Context) (figures, error) {
	var f figures
	var errs []error
	ready := 0
	for i := range h.cl.replicas {
		if err := h.expect(ctx, i, http.MethodGet, "/healthz/live", "", nil, http.StatusOK, nil); err != nil {
			errs = append(errs, err)
		}
		if err := h.expect(ctx, i, http.MethodGet, "/healthz/ready", "", nil, http.StatusOK, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		ready++
	}
	f.add("replicas", len(h.cl.replicas))
	f.add("ready", ready)
	alice := h.users["alice"] // registered through r2
	accepted := 0
	for i := range h.cl.replicas {
		var me struct {
			ID string `json:"id"`
		}
		if err := h.expect(ctx, i, http.MethodGet, "/v1/me", alice.Token, nil, http.StatusOK, &me); err != nil {
			errs = append(errs, err)
			continue
		}
		if me.ID != alice.ID {
			errs = append(errs, fmt.Errorf("/v1/me on r%d is %s, want %s", i+1, me.ID, alice.ID))
			continue
		}
		accepted++
	}
	f.add("token_accepted", accepted)
	err := h.expect(ctx, 2, http.MethodPost, "/v1/auth/login", "", map[string]string{"email": alice.Email, "password": alice.Password}, http.StatusOK, nil)
	if err != nil {
		errs = append(errs, err)
	} else {
		f.add("login_r3", "ok")
	}
	return f, errors.Join(errs...)
}

// checkMemory reads each replica's resident set size at the end.
func (h *harness) checkMemory(ctx context.Context) (figures, error) {
	var f figures
	var errs []error
	const limitMB = 1024
	for _, r := range h.cl.replicas {
		if !r.Running() {
			errs = append(errs, fmt.Errorf("%s is not running: %v", r.Name(), r.ExitErr()))
			continue
		}
		kb, err := r.RSSKB()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Name(), err))
			continue
		}
		mb := float64(kb) / 1024
		f.add(r.Name()+"_rss_mb", mb)
		if mb > limitMB {
			errs = append(errs, fmt.Errorf("%s uses %.0f MB, over %d MB", r.Name(), mb, limitMB))
		}
	}
	return f, errors.Join(errs...)
}

// checkLogs: no replica panicked, and every log line is JSON (a stack trace
// or stray print is not).
func (h *harness) checkLogs(ctx context.Context) (figures, error) {
	var f figures
	var errs []error
	for _, r := range h.cl.replicas {
		s, err := scanLog(r.LogPath())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.add(r.Name()+"_lines", s.lines)
		f.add(r.Name()+"_errors", s.errors)
		if s.panics > 0 {
			errs = append(errs, fmt.Errorf("%s logged %d panic(s): %s (log %s)", r.Name(), s.panics, truncate(s.firstPanic, 200), r.LogPath()))
		}
		if s.notJSON > 0 {
			errs = append(errs, fmt.Errorf("%s wrote %d non-JSON line(s), e.g. %q (log %s)", r.Name(), s.notJSON, truncate(s.firstNotJSON, 200), r.LogPath()))
		}
	}
	f.add("starts", h.starts())
	return f, errors.Join(errs...)
}

func (h *harness) starts() string {
	var parts []string
	for _, r := range h.cl.replicas {
		parts = append(parts, fmt.Sprintf("%s:%d", r.Name(), r.Starts()))
	}
	return strings.Join(parts, ",")
}

type logStats struct {
	lines, errors, panics, notJSON int
	firstPanic, firstNotJSON       string
}

func scanLog(path string) (logStats, error) {
	var s logStats
	fh, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		s.lines++
		switch {
		case strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") || strings.Contains(line, `"panic"`):
			s.panics++
			if s.firstPanic == "" {
				s.firstPanic = line
			}
		case !strings.HasPrefix(line, "{"):
			s.notJSON++
			if s.firstNotJSON == "" {
				s.firstNotJSON = line
			}
		case strings.Contains(line, `"level":"ERROR"`):
			s.errors++
		}
	}
	return s, sc.Err()
}
