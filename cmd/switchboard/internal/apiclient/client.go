// Package apiclient is the command line's typed view of Switchboard's
// public HTTP API: one Operation per route it calls (method, path and the
// OpenAPI operation id), request and answer types that mirror the OpenAPI
// document's schemas (a test holds them to the document), and the
// WebSocket stream of run events. It talks to any server with an API key
// and knows nothing of the server's packages.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ProjectHeader names the project a request acts in.
const ProjectHeader = "X-Switchboard-Project"

// maxAnswerBytes bounds an answer read into memory; the API's own pages
// stop at 1 MiB of items.
const maxAnswerBytes = 16 << 20

// Client calls one server with one credential in one project.
type Client struct {
	// BaseURL is scheme://host[:port] of the server, without /v1.
	BaseURL string
	// Token is an API key (sbk_…) or a user token, sent as a bearer token.
	Token string
	// Project, when set, is sent as X-Switchboard-Project.
	Project string
	// HTTP is the client requests go through; nil: a client with a 30 s
	// timeout.
	HTTP *http.Client
}

// Problem is an RFC 9457 answer of the API: a refused or failed request.
type Problem struct {
	Status   int           `json:"status"`
	Title    string        `json:"title"`
	Detail   string        `json:"detail"`
	Errors   []ErrorDetail `json:"errors"`
	Type     string        `json:"type"`
	Instance string        `json:"instance"`
}

// ErrorDetail is one entry of a problem's errors.
type ErrorDetail struct {
	Message  string          `json:"message"`
	Location string          `json:"location"`
	Value    json.RawMessage `json:"value"`
}

func (p *Problem) Error() string {
	msg := strings.TrimSpace(p.Detail)
	if msg == "" {
		msg = p.Title
	}
	for _, e := range p.Errors {
		msg += "\n  " + e.Location + ": " + e.Message
	}
	return fmt.Sprintf("%d %s", p.Status, msg)
}

// NetworkError is a request that got no usable answer: the server could
// not be reached, the connection dropped, or the answer was not the JSON
// the route promises.
type NetworkError struct{ Err error }

func (e *NetworkError) Error() string { return e.Err.Error() }
func (e *NetworkError) Unwrap() error { return e.Err }

// request is one call: an operation, its path arguments, query and bodies.
type request struct {
	op      Operation
	args    []string
	query   url.Values
	in, out any
	header  http.Header
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// do sends r and decodes a 2xx answer into r.out; any other answer is a
// *Problem, no answer a *NetworkError.
func (c *Client) do(ctx context.Context, r request) error {
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return err
	}
	res, err := c.httpClient().Do(req)
	if err != nil {
		return &NetworkError{Err: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes))
	if err != nil {
		return &NetworkError{Err: fmt.Errorf("read the answer: %w", err)}
	}
	if res.StatusCode >= 300 {
		return problemOf(res, body)
	}
	if r.out == nil || len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, r.out); err != nil {
		return &NetworkError{Err: fmt.Errorf("decode the answer of %s %s: %w", r.op.Method, r.op.Path, err)}
	}
	return nil
}

func (c *Client) newRequest(ctx context.Context, r request) (*http.Request, error) {
	u, err := c.url(r.op.expand(r.args...), r.query)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if r.in != nil {
		b, err := json.Marshal(r.in)
		if err != nil {
			return nil, fmt.Errorf("encode the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.op.Method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	c.authorize(req.Header, r.in != nil)
	return req, nil
}

func (c *Client) authorize(h http.Header, hasBody bool) {
	h.Set("Accept", "application/json, application/problem+json")
	if hasBody {
		h.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
	if c.Project != "" {
		h.Set(ProjectHeader, c.Project)
	}
}

func (c *Client) url(path string, query url.Values) (string, error) {
	base, err := url.Parse(strings.TrimRight(c.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return "", fmt.Errorf("server URL %q: want http(s)://host[:port]", c.BaseURL)
	}
	u := base.JoinPath(path)
	u.RawQuery = query.Encode()
	return u.String(), nil
}

// problemOf reads a refused answer; one that is not problem+json still
// becomes a Problem with its status and the start of its text.
func problemOf(res *http.Response, body []byte) error {
	p := &Problem{}
	if json.Unmarshal(body, p) != nil || (p.Detail == "" && p.Title == "") {
		p = &Problem{Title: http.StatusText(res.StatusCode), Detail: strings.TrimSpace(string(cut(body, 512)))}
	}
	p.Status = res.StatusCode
	return p
}

func cut(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// IsStatus reports whether err is a Problem with that status.
func IsStatus(err error, status int) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status == status
}
