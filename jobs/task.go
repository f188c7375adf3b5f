package jobs

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/switchboard/switchboard/infra/names"
)

// Action types.
const (
	ActionWebhook = "webhook"
	ActionPublish = "publish"
)

// Overlap policies.
const (
	OverlapSkip        = "skip"
	OverlapAllow       = "allow"
	OverlapBufferOne   = "buffer_one"
	OverlapCancelOther = "cancel_other"
)

// Run priorities: River's job priorities, 1 fetched first.
const (
	DefaultPriority = 1
	MaxPriority     = 4
)

// MaxMaxConcurrency bounds max_concurrency.
const MaxMaxConcurrency = 100

// Defaults and limits of task fields.
const (
	DefaultMaxAttempts    = 3
	MaxMaxAttempts        = 25
	DefaultTimeoutSeconds = 30
	MaxTimeoutSeconds     = 600
)

// Action is what a run does: call a webhook or publish a realtime event.
type Action struct {
	Type string `json:"type" enum:"webhook,publish" doc:"webhook calls url; publish sends event to room, or to the task's owner"`
	// webhook
	URL     string            `json:"url,omitempty" doc:"webhook: http(s) URL to call" maxLength:"2048"`
	Method  string            `json:"method,omitempty" doc:"webhook: HTTP method, default POST" enum:"GET,POST,PUT,PATCH,DELETE"`
	Headers map[string]string `json:"headers,omitempty" doc:"webhook: extra request headers"`
	Body    json.RawMessage   `json:"body,omitempty" doc:"webhook: JSON body to send; default: the run's id, task id and tick"`
	// publish
	Event   string          `json:"event,omitempty" doc:"publish: event name (1-64 bytes: letters, digits, . _ : -; task., rpc., server. and room. are reserved)" maxLength:"64"`
	Payload json.RawMessage `json:"payload,omitempty" doc:"publish: event payload"`
	Room    string          `json:"room,omitempty" doc:"publish: room to publish to (1-128 bytes, no control characters, no white space at either end); default the task's owner" maxLength:"128"`
}

// Task is a user's job, scheduled or on demand, as the API shows it.
type Task struct {
	ID             string  `json:"id" format:"uuid"`
	OwnerID        string  `json:"-"`
	ProjectID      string  `json:"project_id" format:"uuid" doc:"the project the task belongs to"`
	Name           string  `json:"name"`
	Schedule       *string `json:"schedule" nullable:"true" doc:"null: an on-demand task, run only when triggered"`
	Timezone       string  `json:"timezone"`
	Action         Action  `json:"action"`
	Active         bool    `json:"active"`
	Overlap        string  `json:"overlap" enum:"skip,allow,buffer_one,cancel_other"`
	MaxConcurrency *int    `json:"max_concurrency" doc:"with overlap allow: at most this many runs running at once, across all workers; null: no limit"`
	MaxAttempts    int     `json:"max_attempts"`
	TimeoutSeconds int     `json:"timeout_seconds"`
	Priority       int     `json:"priority" minimum:"1" maximum:"4" doc:"its runs' priority, 1 (first) to 4 (last): when workers are busy, runs of a higher priority (lower number) start first"`
	SigningSecret  string  `json:"signing_secret,omitempty" doc:"whsec_ secret that signs webhook calls; returned only on create and on a rotation"`
	// PreviousSecretExpiresAt is the end of a rotation's overlap.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at" doc:"after a rotation: until when the secret it replaced still signs webhook calls beside the current one; null: only the current one signs"`
	NextRunAt               *time.Time `json:"next_run_at"`
	LastRunAt               *time.Time `json:"last_run_at"`
	RunCount                int64      `json:"run_count"`
	SkippedTicks            int64      `json:"skipped_ticks" doc:"ticks that produced no run: missed while no worker ran, or skipped because a run was still active"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
}

// ValidationError is bad task input; its message says which field and why.
type ValidationError struct {
	Field string
	Msg   string
}

func (e *ValidationError) Error() string { return e.Msg }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Normalize fills defaults and checks every field of t; the error is a
// *ValidationError. allowPrivate relaxes the webhook URL check.
func (t *Task) Normalize(allowPrivate bool) error {
	if err := t.checkStorable(); err != nil {
		return err
	}
	t.Name = strings.TrimSpace(t.Name)
	if t.Name == "" || len(t.Name) > 200 {
		return invalid("name", "name must be 1 to 200 characters")
	}
	t.Timezone = strings.TrimSpace(t.Timezone)
	if t.Timezone == "" {
		t.Timezone = "UTC"
	}
	if _, err := LoadTimezone(t.Timezone); err != nil {
		return invalid("timezone", "%v", err)
	}
	if t.Schedule != nil {
		spec := strings.TrimSpace(*t.Schedule)
		t.Schedule = &spec
		if _, err := ParseSchedule(spec, t.Timezone); err != nil {
			return invalid("schedule", "%v", err)
		}
	}
	switch t.Overlap {
	case "":
		t.Overlap = OverlapSkip
	case OverlapSkip, OverlapAllow, OverlapBufferOne, OverlapCancelOther:
	default:
		return invalid("overlap", "overlap must be skip, allow, buffer_one or cancel_other, got %q", t.Overlap)
	}
	if m := t.MaxConcurrency; m != nil {
		switch {
		case t.Overlap != OverlapAllow:
			return invalid("max_concurrency", "max_concurrency needs overlap allow (the other policies run one at a time)")
		case *m < 1 || *m > MaxMaxConcurrency:
			return invalid("max_concurrency", "max_concurrency must be 1 to %d", MaxMaxConcurrency)
		}
	}
	if t.Priority == 0 {
		t.Priority = DefaultPriority
	}
	if t.Priority < 1 || t.Priority > MaxPriority {
		return invalid("priority", "priority must be 1 to %d", MaxPriority)
	}
	if t.MaxAttempts == 0 {
		t.MaxAttempts = DefaultMaxAttempts
	}
	if t.MaxAttempts < 1 || t.MaxAttempts > MaxMaxAttempts {
		return invalid("max_attempts", "max_attempts must be 1 to %d", MaxMaxAttempts)
	}
	if t.TimeoutSeconds == 0 {
		t.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if t.TimeoutSeconds < 1 || t.TimeoutSeconds > MaxTimeoutSeconds {
		return invalid("timeout_seconds", "timeout_seconds must be 1 to %d", MaxTimeoutSeconds)
	}
	return t.Action.normalize(allowPrivate)
}

// OnDemand reports whether the task has no schedule: it runs only when
// triggered.
func (t *Task) OnDemand() bool { return t.Schedule == nil }

// Task kinds, the listing filter.
const (
	KindScheduled = "scheduled"
	KindOnDemand  = "on_demand"
)

// forbiddenHeaders are hop-by-hop headers, or set by the webhook client,
// and cannot be given by a task.
var forbiddenHeaders = []string{
	"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Trailers",
	"Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Proxy-Connection", "Expect", "User-Agent",
}

func (a *Action) normalize(allowPrivate bool) error {
	switch a.Type {
	case ActionWebhook:
		return a.normalizeWebhook(allowPrivate)
	case ActionPublish:
		return a.normalizePublish()
	case "":
		return invalid("action.type", "action.type is required: webhook or publish")
	}
	return invalid("action.type", "action.type must be webhook or publish, got %q", a.Type)
}

func (a *Action) normalizeWebhook(allowPrivate bool) error {
	if a.Event != "" || len(nullToNil(a.Payload)) > 0 || a.Room != "" {
		return invalid("action", "a webhook action takes url, method, headers and body; event, payload and room belong to publish")
	}
	a.URL = strings.TrimSpace(a.URL)
	if err := CheckWebhookURL(a.URL, allowPrivate); err != nil {
		return invalid("action.url", "%v", err)
	}
	a.Method = strings.ToUpper(strings.TrimSpace(a.Method))
	switch a.Method {
	case "":
		a.Method = http.MethodPost
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return invalid("action.method", "action.method must be GET, POST, PUT, PATCH or DELETE, got %q", a.Method)
	}
	if err := checkHeaders(a.Headers); err != nil {
		return err
	}
	a.Body = nullToNil(a.Body)
	if len(a.Body) > maxJSON {
		return invalid("action.body", "action.body must be at most 64 KiB of JSON")
	}
	return nil
}

func checkHeaders(h map[string]string) error {
	if len(h) > 50 {
		return invalid("action.headers", "action.headers has more than 50 entries")
	}
	seen := make(map[string]string, len(h))
	for k, v := range h {
		if err := checkHeader(k, v); err != nil {
			return err
		}
		canon := textproto.CanonicalMIMEHeaderKey(k)
		if other, dup := seen[canon]; dup {
			return invalid("action.headers", "action.headers: %q and %q name the same header", other, k)
		}
		seen[canon] = k
	}
	return nil
}

// checkHeader accepts what net/http can send as it was given: a name made of
// RFC 9110 token characters, a value without control characters other than
// tab, and nothing the client sets itself or that concerns only one hop.
func checkHeader(k, v string) error {
	canon := textproto.CanonicalMIMEHeaderKey(k)
	switch {
	case !validHeaderName(k):
		return invalid("action.headers", "action.headers: %q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~ only)", k)
	case len(k)+len(v) > 8<<10:
		return invalid("action.headers", "action.headers[%s]: name and value must be at most 8 KiB", k)
	case !validHeaderValue(v):
		return invalid("action.headers", "action.headers[%s]: values cannot contain control characters or line breaks", k)
	case strings.HasPrefix(strings.ToLower(k), "webhook-"):
		return invalid("action.headers", "action.headers[%s]: webhook-* headers are set by the signer", k)
	}
	for _, f := range forbiddenHeaders {
		if canon == f {
			return invalid("action.headers", "action.headers[%s]: this header is set by the HTTP client or concerns only one hop", k)
		}
	}
	return nil
}

// validHeaderName is httpguts.ValidHeaderFieldName: a non-empty token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue is httpguts.ValidHeaderFieldValue: no control
// characters but tab, no DEL; bytes from 0x80 (obs-text) pass.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func (a *Action) normalizePublish() error {
	if a.URL != "" || a.Method != "" || len(a.Headers) > 0 || len(nullToNil(a.Body)) > 0 {
		return invalid("action", "a publish action takes event, payload and room; url, method, headers and body belong to webhook")
	}
	if err := names.ClientEvent(a.Event); err != nil {
		return invalid("action.event", "action.event: %v", err)
	}
	a.Payload = nullToNil(a.Payload)
	if len(a.Payload) > maxJSON {
		return invalid("action.payload", "action.payload must be at most 64 KiB of JSON")
	}
	if a.Room != "" {
		if err := names.Room(a.Room); err != nil {
			return invalid("action.room", "action.room: %v", err)
		}
	}
	return nil
}

// NewSigningSecret returns a Standard Webhooks secret: whsec_ and 32 random
// bytes in base64.
func NewSigningSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// SigningKey decodes a whsec_ secret into the HMAC key.
func SigningKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, errors.New("signing secret is not whsec_<base64>")
	}
	return key, nil
}

const maxJSON = 64 << 10

func nullToNil(m json.RawMessage) json.RawMessage {
	if s := strings.TrimSpace(string(m)); s == "" || s == "null" {
		return nil
	}
	return m
}
