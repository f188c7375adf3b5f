package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
)

// API keys are long-lived credentials for servers: `Authorization: Bearer
// sbk_…` wherever a user token is accepted. A key acts as its owner within
// its scopes; revoking deletes it, and every request looks its key up in the
// database, so a revoke (or the owner's disable) counts at once on every
// replica.
//
// Why SHA-256 and not bcrypt: the secret is 32 random bytes (256 bits), not
// a password a person chose, so no guessing attack on a fast hash can work;
// a fast unsalted hash lets a request find its key with one index lookup,
// where bcrypt would need a separate key id in the token and ~50 ms of CPU
// per request (a denial of service for the API and its rate limit).

const (
	apiKeyPrefix     = "sbk_"
	apiKeySecretLen  = len(apiKeyPrefix) + 43 // 32 bytes, unpadded base64url
	apiKeyShownLen   = len(apiKeyPrefix) + 8  // the part lists show
	maxAPIKeysPerOwn = 100
)

// Scopes of an API key.
const (
	scopeRead  = "read"  // GET and HEAD of the user routes
	scopeWrite = "write" // every method of the user routes (includes read)
	scopeAdmin = "admin" // the operator routes and admin powers; admins only
)

// APIKey is a key as lists show it: never its secret.
type APIKey struct {
	ID         string     `json:"id" format:"uuid"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix" doc:"the first 12 characters of the secret, to recognise it"`
	Scopes     []string   `json:"scopes" doc:"read: GET and HEAD; write: every method (includes read); admin: the operator routes (admins only)"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at" doc:"null: never expires"`
	LastUsedAt *time.Time `json:"last_used_at" doc:"updated at most once a minute; null: never used"`
}

type apiKeyCreated struct {
	APIKey
	Secret string `json:"secret" doc:"the key, shown only in this answer: send it as Authorization: Bearer sbk_…"`
}

type apiKeyCreateInput struct {
	Body struct {
		Name      string     `json:"name" minLength:"1" maxLength:"100" doc:"what the key is for; no control characters"`
		ExpiresAt *time.Time `json:"expires_at,omitempty" doc:"when the key stops working; must be in the future; omitted: never"`
		Scopes    []string   `json:"scopes,omitempty" minItems:"1" maxItems:"3" enum:"read,write,admin" doc:"default [\"read\",\"write\"]; admin only for admins; each at most once"`
	}
}

type apiKeyCreateOutput struct {
	Body apiKeyCreated
}

type apiKeyListOutput struct {
	Body struct {
		Items []APIKey `json:"items" nullable:"false" doc:"newest first; at most 100 keys per account"`
	}
}

type apiKeyIDInput struct {
	IDPath
}

func registerAPIKeys(api huma.API, s *Server) {
	tags := []string{"API keys"}
	huma.Register(api, huma.Operation{
		OperationID: "api-key-create", Method: http.MethodPost, Path: "/v1/api-keys",
		Summary: "Create an API key", Tags: tags, Security: bearer, DefaultStatus: http.StatusCreated,
		Description: "Returns the secret once; only its SHA-256 is stored. Needs a user token: an API key cannot make keys.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict, http.StatusUnprocessableEntity},
	}, s.createAPIKey)
	huma.Register(api, huma.Operation{
		OperationID: "api-key-list", Method: http.MethodGet, Path: "/v1/api-keys",
		Summary: "List your API keys, newest first", Tags: tags, Security: bearer,
		Description: "Prefix, name, scopes, creation, expiry and last use of each key; never the secret.",
		Errors:      []int{http.StatusUnauthorized},
	}, s.listAPIKeys)
	huma.Register(api, huma.Operation{
		OperationID: "api-key-revoke", Method: http.MethodDelete, Path: "/v1/api-keys/{id}",
		Summary: "Revoke an API key", Tags: tags, Security: bearer, DefaultStatus: http.StatusNoContent,
		Description: "Refused on every replica from the next request on.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.revokeAPIKey)
}

func (s *Server) createAPIKey(ctx context.Context, in *apiKeyCreateInput) (*apiKeyCreateOutput, error) {
	p := principal(ctx)
	if p.KeyID != "" {
		return nil, huma.Error403Forbidden("an API key cannot create API keys: log in (POST /v1/auth/login) and use that token")
	}
	b := in.Body
	scopes := b.Scopes
	if len(scopes) == 0 {
		scopes = []string{scopeRead, scopeWrite}
	}
	// Checked here, not with uniqueItems: Huma's uniqueItems check panics
	// on an element that is itself an array ({"scopes":[["read"]]}).
	if len(slices.Compact(slices.Sorted(slices.Values(scopes)))) != len(scopes) {
		return nil, huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{
			Message: "scopes must not repeat a scope", Location: "body.scopes",
		})
	}
	if slices.Contains(scopes, scopeAdmin) && !p.IsAdmin() {
		return nil, huma.Error403Forbidden("only admins can create keys with the admin scope")
	}
	if strings.ContainsFunc(b.Name, unicode.IsControl) {
		return nil, huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{
			Message: "name may not contain control characters", Location: "body.name",
		})
	}
	if b.ExpiresAt != nil && !b.ExpiresAt.After(time.Now()) {
		return nil, huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{
			Message: "expires_at must be in the future", Location: "body.expires_at", Value: b.ExpiresAt,
		})
	}
	secret := newAPIKeySecret()
	k, err := apiKeyCreate(ctx, s.opts.Pool, p.UserID, b.Name, secret, sortedScopes(scopes), b.ExpiresAt)
	if err != nil {
		return nil, s.fail(ctx, err, accountGone, fmt.Sprintf("an account has at most %d API keys; revoke one first", maxAPIKeysPerOwn))
	}
	return &apiKeyCreateOutput{Body: apiKeyCreated{APIKey: k, Secret: secret}}, nil
}

func (s *Server) listAPIKeys(ctx context.Context, _ *struct{}) (*apiKeyListOutput, error) {
	items, err := apiKeyList(ctx, s.opts.Pool, principal(ctx).UserID)
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	out := &apiKeyListOutput{}
	out.Body.Items = items
	return out, nil
}

func (s *Server) revokeAPIKey(ctx context.Context, in *apiKeyIDInput) (*struct{}, error) {
	if err := apiKeyDelete(ctx, s.opts.Pool, principal(ctx).UserID, in.ID); err != nil {
		return nil, s.fail(ctx, err, "no such API key", "")
	}
	return nil, nil
}

// sortedScopes is scopes in one order, so lists compare equal.
func sortedScopes(scopes []string) []string {
	out := slices.Clone(scopes)
	slices.Sort(out)
	return slices.Compact(out)
}

func newAPIKeySecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return apiKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func hashAPIKey(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// wellFormedAPIKey checks a presented key's shape before any database work.
func wellFormedAPIKey(raw string) bool {
	if len(raw) != apiKeySecretLen || !strings.HasPrefix(raw, apiKeyPrefix) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(raw[len(apiKeyPrefix):])
	return err == nil
}

// apiKeyPrincipal authenticates a request by its key: the key, its owner's
// role and state, in one statement. The key is refused with a reason a
// client can act on.
func (s *Server) apiKeyPrincipal(ctx context.Context, raw string) (Principal, error) {
	if !wellFormedAPIKey(raw) {
		return Principal{}, &accountRefused{"the API key is malformed: keys look like sbk_ and 43 characters"}
	}
	k, err := apiKeyAuthenticate(ctx, s.opts.Pool, hashAPIKey(raw))
	switch {
	case errors.Is(err, db.ErrNotFound):
		return Principal{}, &accountRefused{"unknown or revoked API key"}
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			s.opts.Logger.ErrorContext(ctx, "look up an API key", "error", err)
		}
		return Principal{}, err
	case k.expiresAt != nil && !k.expiresAt.After(time.Now()):
		return Principal{}, &accountRefused{"this API key expired at " + k.expiresAt.UTC().Format(time.RFC3339)}
	case k.disabled:
		return Principal{}, &accountRefused{accountDisabled}
	}
	role := k.role
	if !slices.Contains(k.scopes, scopeAdmin) {
		role = accounts.RoleUser // a key without the admin scope has no admin powers
	}
	return Principal{UserID: k.userID, Role: role, KeyID: k.id, Scopes: k.scopes}, nil
}

// checkScopes is Huma middleware after checkAccount: an API key may call an
// operator route only with the admin scope, GET and HEAD with read or
// write, and anything else with write. User tokens pass.
func (s *Server) checkScopes(ctx huma.Context, next func(huma.Context)) {
	p, ok := ctx.Context().Value(principalKey{}).(Principal)
	if !ok || p.KeyID == "" {
		next(ctx)
		return
	}
	op := ctx.Operation()
	need := scopeWrite
	switch {
	case isOperatorPath(op.Path):
		need = scopeAdmin
	case op.Method == http.MethodGet || op.Method == http.MethodHead:
		if slices.Contains(p.Scopes, scopeRead) {
			next(ctx)
			return
		}
	}
	if slices.Contains(p.Scopes, need) {
		next(ctx)
		return
	}
	_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, fmt.Sprintf(
		"this API key has the scopes [%s]; %s %s needs %s", strings.Join(p.Scopes, ","), op.Method, op.Path, need))
}

const (
	accountGone     = "this account no longer exists"
	accountDisabled = "this account is disabled; an operator can enable it again"
)

// accountRefused is an API key that may not act.
type accountRefused struct{ reason string }

func (e *accountRefused) Error() string { return e.reason }

// Data layer of api_keys.

const apiKeyColumns = "id::text, name, prefix, scopes, created_at, expires_at, last_used_at"

func scanAPIKey(row pgx.Row, k *APIKey) error {
	return row.Scan(&k.ID, &k.Name, &k.Prefix, &k.Scopes, &k.CreatedAt, &k.ExpiresAt, &k.LastUsedAt)
}

// apiKeyCreate stores a key, at most maxAPIKeysPerOwn per owner: the owner's
// row is locked so concurrent creates count one after the other.
func apiKeyCreate(ctx context.Context, q db.DB, userID, name, secret string, scopes []string, expires *time.Time) (APIKey, error) {
	var k APIKey
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		var n int
		err := tx.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM api_keys WHERE user_id = u.id) FROM users u WHERE u.id = $1 FOR UPDATE`, userID).Scan(&n)
		if err != nil {
			return db.Translate(err)
		}
		if n >= maxAPIKeysPerOwn {
			return db.ErrConflict
		}
		return db.Translate(scanAPIKey(tx.QueryRow(ctx, `
			INSERT INTO api_keys (user_id, name, prefix, secret_hash, scopes, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+apiKeyColumns,
			userID, name, secret[:apiKeyShownLen], hashAPIKey(secret), scopes, expires), &k))
	})
	return k, err
}

func apiKeyList(ctx context.Context, q db.DB, userID string) ([]APIKey, error) {
	rows, err := q.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE user_id = $1 ORDER BY created_at DESC, id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	out := []APIKey{}
	for rows.Next() {
		var k APIKey
		if err := scanAPIKey(rows, &k); err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

func apiKeyDelete(ctx context.Context, q db.DB, userID, id string) error {
	tag, err := q.Exec(ctx, `DELETE FROM api_keys WHERE id = $1 AND user_id = $2`, id, userID)
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return db.ErrNotFound
	}
	return nil
}

// authKey is what a request by API key reads.
type authKey struct {
	id, userID, role string
	scopes           []string
	expiresAt        *time.Time
	disabled         bool
}

// apiKeyAuthenticate finds a key by its hash with its owner's role and
// state, and records its use: last_used_at is written only when it is older
// than a minute, so a busy key costs one write a minute, not one a request.
func apiKeyAuthenticate(ctx context.Context, q db.DB, hash []byte) (authKey, error) {
	var k authKey
	err := q.QueryRow(ctx, `
		WITH k AS (
			SELECT id, user_id, scopes, expires_at, last_used_at FROM api_keys WHERE secret_hash = $1
		), touch AS (
			UPDATE api_keys a SET last_used_at = now() FROM k
			WHERE a.id = k.id AND (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute')
			  AND (k.expires_at IS NULL OR k.expires_at > now())
		)
		SELECT k.id::text, k.user_id::text, u.role, k.scopes, k.expires_at, u.disabled_at IS NOT NULL
		FROM k JOIN users u ON u.id = k.user_id`, hash).
		Scan(&k.id, &k.userID, &k.role, &k.scopes, &k.expiresAt, &k.disabled)
	return k, db.Translate(err)
}
