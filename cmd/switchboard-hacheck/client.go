package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// user is an account the checks act as.
type user struct {
	Email    string
	Password string
	Token    string
	ID       string
}

// response is an answer read whole.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r *response) decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %d answer: %w: %s", r.Status, err, truncate(string(r.Body), 200))
	}
	return nil
}

// httpClient dials from localIP when set (a distinct 127.x address is a
// distinct client IP to the rate limiter).
func httpClient(localIP string) *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

var defaultClient = httpClient("")

// send makes one request with hc to url, with a JSON body when body is
// not nil and a bearer token when token is set.
func send(ctx context.Context, hc *http.Client, method, url, token string, body any) (*response, error) {
	headers := map[string]string{}
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
		headers["Content-Type"] = "application/json"
	}
	if token != "" {
		headers["Authorization"] = "Bearer " + token
	}
	return sendRaw(ctx, hc, method, url, headers, b)
}

// sendRaw makes one request with these headers and body (none when nil)
// and reads the answer whole.
func sendRaw(ctx context.Context, hc *http.Client, method, url string, headers map[string]string, body []byte) (*response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// call sends to one replica.
func (h *harness) call(ctx context.Context, r int, method, path, token string, body any) (*response, error) {
	return send(ctx, defaultClient, method, h.cl.replicas[r].URL(path), token, body)
}

// expect sends to one replica and decodes the answer into out when the
// status is want; any other status is an error quoting the body.
func (h *harness) expect(ctx context.Context, r int, method, path, token string, body any, want int, out any) error {
	resp, err := h.call(ctx, r, method, path, token, body)
	if err != nil {
		return fmt.Errorf("%s %s on r%d: %w", method, path, r+1, err)
	}
	return checkStatus(resp, method, path, r, want, out)
}

func checkStatus(resp *response, method, path string, r, want int, out any) error {
	if resp.Status != want {
		return fmt.Errorf("%s %s on r%d: status %d, want %d: %s", method, path, r+1, resp.Status, want, truncate(string(resp.Body), 300))
	}
	if out != nil {
		return resp.decode(out)
	}
	return nil
}

// retrying is the client a load balancer would be: on a connection error or
// a 503 it tries the next replica, a few times (and after a 429 it waits).
type retrying struct {
	h        *harness
	hc       *http.Client
	attempts int
}

// do sends starting at replica start; it returns the answer, how many
// retries it took, and an error only when every attempt failed.
func (c retrying) do(ctx context.Context, start int, method, path, token string, body any) (*response, int, error) {
	var last error
	n := len(c.h.cl.replicas)
	for i := range c.attempts {
		r := c.h.cl.replicas[(start+i)%n]
		resp, err := send(ctx, c.hc, method, r.URL(path), token, body)
		wait := time.Duration(20*(i+1)) * time.Millisecond
		switch {
		case err == nil && resp.Status == http.StatusTooManyRequests:
			// Not an availability problem: wait as told (at most a second).
			last = fmt.Errorf("%s: 429", r.Name())
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			wait = min(time.Second, max(wait, time.Duration(secs)*time.Second))
		case err == nil && resp.Status != http.StatusServiceUnavailable:
			return resp, i, nil
		case err == nil:
			last = fmt.Errorf("%s: 503 %s", r.Name(), truncate(string(resp.Body), 120))
		case ctx.Err() != nil:
			return nil, i, ctx.Err()
		default:
			last = fmt.Errorf("%s: %w", r.Name(), err)
		}
		select {
		case <-ctx.Done():
			return nil, i, ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil, c.attempts - 1, fmt.Errorf("%s %s failed %d times: %w", method, path, c.attempts, last)
}

// backoff is how long a client waits before its retry number i (from 0):
// base, doubling, at most ceiling, then ±50 % jitter, so clients one
// outage failed together neither come back at one instant nor hammer a
// cluster that is recovering.
func backoff(i int, base, ceiling time.Duration) time.Duration {
	d := ceiling
	if i < 30 && base<<i < ceiling {
		d = base << i
	}
	return d/2 + rand.N(d+1)
}

func (h *harness) retrier() retrying {
	return retrying{h: h, hc: httpClient(""), attempts: 8}
}

// registerUsers creates the accounts the checks use, spread over replicas.
func (h *harness) registerUsers(ctx context.Context) error {
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	names := []string{"admin", "alice", "bob", "carol", "kim"}
	for i, name := range names {
		email := name + "-" + suffix + "@hacheck.test"
		if name == "admin" {
			email = adminEmail
		}
		u := &user{Email: email, Password: "hacheck-password-" + name}
		var out struct {
			Token string `json:"token"`
			User  struct {
				ID   string `json:"id"`
				Role string `json:"role"`
			} `json:"user"`
		}
		r := i % replicaCount
		resp, err := h.call(ctx, r, http.MethodPost, "/v1/auth/register", "", map[string]string{"email": u.Email, "password": u.Password})
		if err != nil {
			return fmt.Errorf("register %s: %w", name, err)
		}
		if resp.Status == http.StatusConflict && name == "admin" {
			// A reused DATABASE_URL: the admin exists already.
			resp, err = h.call(ctx, r, http.MethodPost, "/v1/auth/login", "", map[string]string{"email": u.Email, "password": u.Password})
			if err != nil {
				return fmt.Errorf("login %s: %w", name, err)
			}
			if err := checkStatus(resp, "POST", "/v1/auth/login", r, http.StatusOK, &out); err != nil {
				return err
			}
		} else if err := checkStatus(resp, "POST", "/v1/auth/register", r, http.StatusCreated, &out); err != nil {
			return err
		}
		if name == "admin" {
			// Registering never grants admin; the operator's command does.
			if err := h.cl.grantAdmin(ctx, adminEmail); err != nil {
				return err
			}
		}
		u.Token, u.ID = out.Token, out.User.ID
		h.users[name] = u
	}
	return nil
}

// listAll follows next_cursor through a paginated list.
func (h *harness) listAll(ctx context.Context, path, token string, each func(json.RawMessage) error) error {
	cursor := ""
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	for page := 0; page < 1000; page++ {
		p := path + sep + "limit=100"
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, _, err := h.retrier().do(ctx, page, http.MethodGet, p, token, nil)
		if err != nil {
			return err
		}
		var out struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor *string           `json:"next_cursor"`
		}
		if err := checkStatus(resp, "GET", p, page%replicaCount, http.StatusOK, &out); err != nil {
			return err
		}
		for _, it := range out.Items {
			if err := each(it); err != nil {
				return err
			}
		}
		if out.NextCursor == nil || *out.NextCursor == "" || len(out.Items) == 0 {
			return nil
		}
		cursor = *out.NextCursor
	}
	return errors.New("more than 1000 pages")
}
