package accounts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
)

// API keys are long-lived credentials for servers, sent wherever a user
// token is accepted. A key acts as its owner within its scopes; revoking
// deletes it, and every request looks its key up in the database, so a
// revoke (or the owner's disable) counts at once on every replica.
//
// Why SHA-256 and not bcrypt: the secret is 32 random bytes (256 bits), not
// a password a person chose, so no guessing attack on a fast hash can work;
// a fast unsalted hash lets a request find its key with one index lookup,
// where bcrypt would need a separate key id in the token and ~50 ms of CPU
// per request (a denial of service for the API and its rate limit).

// APIKeyPrefix starts every API key's secret, so a bearer credential that
// starts with it is a key and anything else a user token.
const APIKeyPrefix = "sbk_"

const (
	apiKeyShownLen = len(APIKeyPrefix) + 8 // the part lists show
)

// maxListedKeys bounds a list of a project's keys: the largest api_keys
// quota the configuration accepts.
const maxListedKeys = 1000

// Scopes of an API key.
const (
	ScopeRead  = "read"  // GET and HEAD of the user routes
	ScopeWrite = "write" // every method of the user routes (includes read)
	ScopeAdmin = "admin" // the operator routes and admin powers; admins only
)

// Errors of API keys, besides the refusals of AuthenticateAPIKey.
var (
	ErrAPIKeyNotFound = fmt.Errorf("%w: no such API key", db.ErrNotFound)
)

// The refusals of a presented key; an expired key is refused with its
// expiry.
var (
	ErrAPIKeyMalformed error = &RefusedError{"the API key is malformed: keys look like sbk_ and 43 characters"}
	ErrAPIKeyUnknown   error = &RefusedError{"unknown or revoked API key"}
)

// APIKey is a key as its owner sees it: never its secret.
type APIKey struct {
	ID         string
	Name       string
	Prefix     string // the first 12 characters of the secret
	Scopes     []string
	CreatedAt  time.Time
	ExpiresAt  *time.Time // nil: never
	LastUsedAt *time.Time // written at most once a minute; nil: never used
}

// NewAPIKey is a key CreateAPIKey stores.
type NewAPIKey struct {
	Name      string
	Scopes    []string   // nil: read and write
	ExpiresAt *time.Time // nil: never
}

// CreateAPIKey stores a new key of the project, made by the account, and
// returns it with its secret, which is stored only as its hash and never
// shown again. A project has at most lim.APIKeys keys (a
// quota.ExceededError), counted under the project's api_keys lock, so
// concurrent creates on any replicas count one after the other. An unknown
// owner is ErrUserNotFound.
func CreateAPIKey(ctx context.Context, q db.DB, lim quota.Limits, userID, projectID string, k NewAPIKey) (APIKey, string, error) {
	secret := secretKind(APIKeyPrefix).newSecret()
	scopes := []string{ScopeRead, ScopeWrite}
	if len(k.Scopes) > 0 {
		scopes = slices.Compact(slices.Sorted(slices.Values(k.Scopes)))
	}
	var out APIKey
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `SELECT FROM users WHERE id = $1`, userID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return pgx.ErrNoRows // no such owner
		}
		err = quota.Take(ctx, tx, quota.APIKeys, lim.OrDefaults().APIKeys, projectID,
			`SELECT count(*) FROM api_keys WHERE project_id = $1`, 1)
		if err != nil {
			return err
		}
		return scanAPIKey(tx.QueryRow(ctx, `
			INSERT INTO api_keys (user_id, project_id, name, prefix, secret_hash, scopes, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+apiKeyColumns,
			userID, projectID, k.Name, secret[:apiKeyShownLen], hashSecret(secret), scopes, k.ExpiresAt), &out)
	})
	return out, secret, translate(err, ErrUserNotFound)
}

// ListAPIKeys returns the project's keys, newest first (at most
// maxListedKeys).
func ListAPIKeys(ctx context.Context, q db.DB, projectID string) ([]APIKey, error) {
	rows, err := q.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE project_id = $1
		ORDER BY created_at DESC, id LIMIT $2`, projectID, maxListedKeys)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (APIKey, error) {
		var k APIKey
		err := scanAPIKey(row, &k)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// DeleteAPIKey revokes a key of the project: ErrAPIKeyNotFound when the
// project has no key with that id.
func DeleteAPIKey(ctx context.Context, q db.DB, projectID, id string) error {
	if _, err := projectParam(id); err != nil {
		return ErrAPIKeyNotFound
	}
	tag, err := q.Exec(ctx, `DELETE FROM api_keys WHERE id = $1 AND project_id = $2`, id, projectID)
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrAPIKeyNotFound
	}
	return nil
}

// KeyHolder is who a request made with an API key acts as: the key's
// creator, with the creator's role as stored now, except that a key
// without the admin scope has no admin powers; in the key's project, with
// the creator's role there as stored now capped by the scopes (read:
// viewer, write: developer).
type KeyHolder struct {
	KeyID       string
	UserID      string
	Role        string
	Scopes      []string
	ProjectID   string
	ProjectRole string
}

// ErrKeyCreatorLeft refuses a key whose creator is no longer a member of
// its project.
var ErrKeyCreatorLeft error = &RefusedError{"the key's creator is no longer a member of its project"}

// scopeRole is the most a key's scopes allow in its project.
func scopeRole(scopes []string) string {
	if slices.Contains(scopes, ScopeWrite) {
		return ProjectDeveloper
	}
	return ProjectViewer
}

// AuthenticateAPIKey finds the key whose secret was presented, with its
// owner's role and state, in one statement, and records its use. A key
// that may not act is refused with a reason a client can act on: malformed
// (before any database work), unknown or revoked, expired, or its owner
// disabled.
func AuthenticateAPIKey(ctx context.Context, q db.DB, secret string) (KeyHolder, error) {
	if !secretKind(APIKeyPrefix).wellFormed(secret) {
		return KeyHolder{}, ErrAPIKeyMalformed
	}
	k, err := apiKeyByHash(ctx, q, hashSecret(secret))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return KeyHolder{}, ErrAPIKeyUnknown
	case err != nil:
		return KeyHolder{}, fmt.Errorf("look up api key: %w", db.Translate(err))
	case k.expiresAt != nil && !k.expiresAt.After(time.Now()):
		return KeyHolder{}, &RefusedError{"this API key expired at " + k.expiresAt.UTC().Format(time.RFC3339)}
	case k.disabled:
		return KeyHolder{}, ErrAccountDisabled
	case k.memberRole == nil && k.role != RoleAdmin:
		return KeyHolder{}, ErrKeyCreatorLeft
	}
	h := KeyHolder{KeyID: k.id, UserID: k.userID, Role: k.role, Scopes: k.scopes, ProjectID: k.projectID, ProjectRole: ProjectOwner}
	if k.memberRole != nil {
		h.ProjectRole = *k.memberRole
	}
	h.ProjectRole = LesserRole(h.ProjectRole, scopeRole(k.scopes))
	if !slices.Contains(h.Scopes, ScopeAdmin) {
		h.Role = RoleUser
	}
	return h, nil
}

const apiKeyColumns = "id::text, name, prefix, scopes, created_at, expires_at, last_used_at"

func scanAPIKey(row pgx.Row, k *APIKey) error {
	return row.Scan(&k.ID, &k.Name, &k.Prefix, &k.Scopes, &k.CreatedAt, &k.ExpiresAt, &k.LastUsedAt)
}

// storedKey is what a request by API key reads.
type storedKey struct {
	id, userID, role, projectID string
	scopes                      []string
	expiresAt                   *time.Time
	disabled                    bool
	memberRole                  *string // the creator's role in the key's project; nil: not a member
}

// apiKeyByHash finds a key by its hash with its owner's role and state,
// and records its use: last_used_at is written only when it is older than
// a minute, so a busy key costs one write a minute, not one a request.
func apiKeyByHash(ctx context.Context, q db.DB, hash []byte) (storedKey, error) {
	var k storedKey
	err := q.QueryRow(ctx, `
		WITH k AS (
			SELECT id, user_id, project_id, scopes, expires_at, last_used_at FROM api_keys WHERE secret_hash = $1
		), touch AS (
			UPDATE api_keys a SET last_used_at = now() FROM k
			WHERE a.id = k.id AND (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute')
			  AND (k.expires_at IS NULL OR k.expires_at > now())
		)
		SELECT k.id::text, k.user_id::text, u.role, k.scopes, k.expires_at, u.disabled_at IS NOT NULL,
		       k.project_id::text, m.role
		FROM k JOIN users u ON u.id = k.user_id
		LEFT JOIN project_members m ON m.project_id = k.project_id AND m.user_id = k.user_id`, hash).
		Scan(&k.id, &k.userID, &k.role, &k.scopes, &k.expiresAt, &k.disabled, &k.projectID, &k.memberRole)
	return k, err
}
