package apiclient

import (
	"encoding/json"
	"time"
)

// Task is a stored task (the document's Task).
type Task struct {
	ID                      string     `json:"id"`
	ProjectID               string     `json:"project_id"`
	Name                    string     `json:"name"`
	Schedule                *string    `json:"schedule"`
	Timezone                string     `json:"timezone"`
	Action                  Action     `json:"action"`
	Active                  bool       `json:"active"`
	Overlap                 string     `json:"overlap"`
	MaxConcurrency          *int       `json:"max_concurrency"`
	MaxAttempts             int        `json:"max_attempts"`
	TimeoutSeconds          int        `json:"timeout_seconds"`
	Priority                int        `json:"priority"`
	SigningSecret           string     `json:"signing_secret,omitempty"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	NextRunAt               *time.Time `json:"next_run_at"`
	LastRunAt               *time.Time `json:"last_run_at"`
	RunCount                int64      `json:"run_count"`
	SkippedTicks            int64      `json:"skipped_ticks"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
}

// Action is what a run does: a webhook call (url, method, headers, body)
// or a published event (event, payload, room), told apart by Type.
type Action struct {
	Type    string            `json:"type"`
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
	Event   string            `json:"event,omitempty"`
	Payload json.RawMessage   `json:"payload,omitempty"`
	Room    string            `json:"room,omitempty"`
}

// TaskCreate is the body of a new task (TaskCreateBody).
type TaskCreate struct {
	Name           string  `json:"name"`
	Schedule       *string `json:"schedule,omitempty"`
	Timezone       string  `json:"timezone,omitempty"`
	Action         Action  `json:"action"`
	Active         *bool   `json:"active,omitempty"`
	Overlap        string  `json:"overlap,omitempty"`
	MaxConcurrency *int    `json:"max_concurrency,omitempty"`
	MaxAttempts    int     `json:"max_attempts,omitempty"`
	TimeoutSeconds int     `json:"timeout_seconds,omitempty"`
	Priority       int     `json:"priority,omitempty"`
}

// TaskPatch changes the fields it sets (TaskPatchBody).
type TaskPatch struct {
	Name           *string          `json:"name,omitempty"`
	Schedule       Nullable[string] `json:"schedule,omitzero"`
	Timezone       *string          `json:"timezone,omitempty"`
	Action         *Action          `json:"action,omitempty"`
	Active         *bool            `json:"active,omitempty"`
	Overlap        *string          `json:"overlap,omitempty"`
	MaxConcurrency Nullable[int]    `json:"max_concurrency,omitzero"`
	MaxAttempts    *int             `json:"max_attempts,omitempty"`
	TimeoutSeconds *int             `json:"timeout_seconds,omitempty"`
	Priority       *int             `json:"priority,omitempty"`
}

// Nullable is a field a patch may leave out, set to null, or set to a
// value.
type Nullable[T any] struct {
	Set   bool // false: the field is left out
	Value *T   // nil: null
}

// Of is a Nullable set to v.
func Of[T any](v T) Nullable[T] { return Nullable[T]{Set: true, Value: &v} }

// Null is a Nullable set to null.
func Null[T any]() Nullable[T] { return Nullable[T]{Set: true} }

// IsZero reports a field left out (for omitzero).
func (n Nullable[T]) IsZero() bool { return !n.Set }

// MarshalJSON writes the value, or null.
func (n Nullable[T]) MarshalJSON() ([]byte, error) { return json.Marshal(n.Value) }

// Trigger is the optional input of an on-demand run (TriggerBody).
type Trigger struct {
	Payload        json.RawMessage `json:"payload,omitempty"`
	RunAt          *time.Time      `json:"run_at,omitempty"`
	Priority       int             `json:"priority,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// Backfill is a range of ticks to run (BackfillInputBody).
type Backfill struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// BackfillResult is what a backfill made (BackfillOutputBody).
type BackfillResult struct {
	Ticks   int   `json:"ticks"`
	Created int   `json:"created"`
	Items   []Run `json:"items"`
}

// RotateSecret sets how long the replaced secret keeps signing
// (RotateSecretBody).
type RotateSecret struct {
	PreviousExpiresAt *time.Time `json:"previous_expires_at,omitempty"`
}

// Run is one run of a task (Run).
type Run struct {
	ID              string          `json:"id"`
	TaskID          string          `json:"task_id"`
	Status          string          `json:"status"`
	Trigger         string          `json:"trigger"`
	ScheduledFor    time.Time       `json:"scheduled_for"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	Attempt         int             `json:"attempt"`
	DurationMS      *int64          `json:"duration_ms"`
	HTTPStatus      *int            `json:"http_status"`
	Error           *string         `json:"error"`
	ResponseExcerpt *string         `json:"response_excerpt"`
	SkippedTicks    int64           `json:"skipped_ticks"`
	Payload         json.RawMessage `json:"payload"`
	RetryOf         *string         `json:"retry_of"`
	NextAttemptAt   *time.Time      `json:"next_attempt_at"`
	Priority        int             `json:"priority"`
	Output          json.RawMessage `json:"output"`
	OutputTruncated bool            `json:"output_truncated"`
	CreatedAt       time.Time       `json:"created_at"`
}

// Finished reports a run that will not change again.
func (r Run) Finished() bool {
	return r.Status == "succeeded" || r.Status == "failed" || r.Status == "cancelled"
}

// Attempt is one attempt of a run (Attempt).
type Attempt struct {
	Attempt         int        `json:"attempt"`
	Status          string     `json:"status"`
	StartedAt       time.Time  `json:"started_at"`
	FinishedAt      *time.Time `json:"finished_at"`
	DurationMS      *int64     `json:"duration_ms"`
	HTTPStatus      *int       `json:"http_status"`
	Error           *string    `json:"error"`
	ResponseExcerpt *string    `json:"response_excerpt"`
}

// TaskPage is one page of tasks (TaskList).
type TaskPage struct {
	Items      []Task  `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// RunPage is one page of runs (RunList).
type RunPage struct {
	Items      []Run   `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// AttemptList is every attempt of a run (AttemptListOutputBody).
type AttemptList struct {
	Items []Attempt `json:"items"`
}

// APIKey is a key without its secret (APIKey).
type APIKey struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// APIKeyCreated is a new key with its secret, shown once (ApiKeyCreated).
type APIKeyCreated struct {
	APIKey
	Secret string `json:"secret"`
}

// APIKeyCreate is the body of a new key (ApiKeyCreateInputBody).
type APIKeyCreate struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Scopes    []string   `json:"scopes,omitempty"`
}

// APIKeyList is every key of the caller (ApiKeyListOutputBody).
type APIKeyList struct {
	Items []APIKey `json:"items"`
}

// Credentials sign a person in (LoginCredentials).
type Credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// Session is a signed-in user's token (AuthBody).
type Session struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	User      User      `json:"user"`
}

// User is an account (User).
type User struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
}

// Ticket opens one WebSocket (TicketBody).
type Ticket struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}
