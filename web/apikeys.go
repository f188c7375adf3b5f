package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
)

// The API key routes. A key (accounts.CreateAPIKey) is sent as
// `Authorization: Bearer sbk_…` wherever a user token is accepted and acts
// as its owner within its scopes (checkScopes).

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
		Items []APIKey `json:"items" nullable:"false" doc:"the project's keys, newest first; at most SWITCHBOARD_QUOTA_API_KEYS (default 100)"`
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
	// Checked here, not with uniqueItems: Huma's uniqueItems check panics
	// on an element that is itself an array ({"scopes":[["read"]]}).
	if len(slices.Compact(slices.Sorted(slices.Values(b.Scopes)))) != len(b.Scopes) {
		return nil, huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{
			Message: "scopes must not repeat a scope", Location: "body.scopes",
		})
	}
	if slices.Contains(b.Scopes, accounts.ScopeAdmin) && !p.IsAdmin() {
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
	k, secret, err := accounts.CreateAPIKey(ctx, s.opts.Pool, s.opts.Quotas, p.UserID, p.ProjectID, accounts.NewAPIKey{Name: b.Name, Scopes: b.Scopes, ExpiresAt: b.ExpiresAt})
	if err != nil {
		return nil, s.fail(ctx, err, accounts.ErrAccountGone.Error(), "")
	}
	return &apiKeyCreateOutput{Body: apiKeyCreated{APIKey: apiKeyOut(k), Secret: secret}}, nil
}

func (s *Server) listAPIKeys(ctx context.Context, _ *struct{}) (*apiKeyListOutput, error) {
	keys, err := accounts.ListAPIKeys(ctx, s.opts.Pool, principal(ctx).ProjectID)
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	out := &apiKeyListOutput{}
	out.Body.Items = make([]APIKey, 0, len(keys))
	for _, k := range keys {
		out.Body.Items = append(out.Body.Items, apiKeyOut(k))
	}
	return out, nil
}

func (s *Server) revokeAPIKey(ctx context.Context, in *apiKeyIDInput) (*struct{}, error) {
	if err := accounts.DeleteAPIKey(ctx, s.opts.Pool, principal(ctx).ProjectID, in.ID); err != nil {
		return nil, s.fail(ctx, err, "no such API key", "")
	}
	return nil, nil
}

func apiKeyOut(k accounts.APIKey) APIKey {
	return APIKey{
		ID: k.ID, Name: k.Name, Prefix: k.Prefix, Scopes: k.Scopes,
		CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, LastUsedAt: k.LastUsedAt,
	}
}

// apiKeyPrincipal authenticates a request by its key
// (accounts.AuthenticateAPIKey): an *accounts.RefusedError says why a key
// may not act.
func (s *Server) apiKeyPrincipal(ctx context.Context, raw string) (Principal, error) {
	h, err := accounts.AuthenticateAPIKey(ctx, s.opts.Pool, raw)
	if err != nil {
		s.logUnexpected(ctx, "look up an API key", err)
		return Principal{}, err
	}
	return Principal{UserID: h.UserID, Role: h.Role, KeyID: h.KeyID, Scopes: h.Scopes, ProjectID: h.ProjectID, ProjectRole: h.ProjectRole}, nil
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
	need := accounts.ScopeWrite
	switch {
	case isOperatorPath(op.Path):
		need = accounts.ScopeAdmin
	case op.Method == http.MethodGet || op.Method == http.MethodHead:
		if slices.Contains(p.Scopes, accounts.ScopeRead) {
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
