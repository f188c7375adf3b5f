package accounts_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"

	"github.com/switchboard/switchboard/infra/quota"
)

func TestCreateAPIKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("the secret is shown once and stored as its hash", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		owner := dbtest.User(t, tx, nil)
		k, secret, err := accounts.CreateAPIKey(ctx, tx, quota.Limits{}, owner.ID, owner.Project, accounts.NewAPIKey{Name: "ci"})
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^sbk_[A-Za-z0-9_-]{43}$`).MatchString(secret) || k.Prefix != secret[:12] || k.Name != "ci" {
			t.Fatalf("secret %q, key %+v", secret, k)
		}
		if !slices.Equal(k.Scopes, []string{accounts.ScopeRead, accounts.ScopeWrite}) || k.ExpiresAt != nil || k.LastUsedAt != nil {
			t.Fatalf("defaults: %+v", k)
		}
		var stored []byte
		if err := tx.QueryRow(ctx, `SELECT secret_hash FROM api_keys WHERE id = $1 AND user_id = $2`, k.ID, owner.ID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if want := sha256.Sum256([]byte(secret)); string(stored) != string(want[:]) {
			t.Fatalf("stored %x, want the SHA-256 of the secret", stored)
		}
	})

	t.Run("scopes in one order, each once; the expiry kept", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		owner := dbtest.User(t, tx, nil)
		expires := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		k, _, err := accounts.CreateAPIKey(ctx, tx, quota.Limits{}, owner.ID, owner.Project, accounts.NewAPIKey{
			Name: "ops", Scopes: []string{accounts.ScopeWrite, accounts.ScopeAdmin, accounts.ScopeWrite}, ExpiresAt: &expires,
		})
		if err != nil || !slices.Equal(k.Scopes, []string{accounts.ScopeAdmin, accounts.ScopeWrite}) || k.ExpiresAt == nil || !k.ExpiresAt.Equal(expires) {
			t.Fatalf("created %+v, %v", k, err)
		}
	})

	t.Run("an unknown owner", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		if _, _, err := accounts.CreateAPIKey(ctx, tx, quota.Limits{}, uuid.NewString(), uuid.NewString(), accounts.NewAPIKey{Name: "x"}); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("unknown owner: %v, want ErrUserNotFound", err)
		}
	})

	t.Run("at most the api_keys quota per project", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		owner := dbtest.User(t, tx, nil)
		lim := quota.Limits{APIKeys: 3}
		for i := range lim.APIKeys {
			if _, _, err := accounts.CreateAPIKey(ctx, tx, lim, owner.ID, owner.Project, accounts.NewAPIKey{Name: "k"}); err != nil {
				t.Fatalf("key %d: %v", i+1, err)
			}
		}
		_, _, err := accounts.CreateAPIKey(ctx, tx, lim, owner.ID, owner.Project, accounts.NewAPIKey{Name: "one too many"})
		var exceeded *quota.ExceededError
		if !errors.As(err, &exceeded) || *exceeded != (quota.ExceededError{Quota: quota.APIKeys, Limit: 3, Used: 3, Asked: 1}) {
			t.Fatalf("key 4: %v, want the api_keys quota exceeded, 3 of 3 used", err)
		}
		if keys, err := accounts.ListAPIKeys(ctx, tx, owner.Project); err != nil || len(keys) != 3 {
			t.Fatalf("%d keys stored (%v), want 3", len(keys), err)
		}
	})
}

// TestCreateAPIKeyConcurrently: creates racing on separate connections
// count one after the other, so none goes past the quota.
func TestCreateAPIKeyConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner := dbtest.User(t, pool, nil)
	const free = 3
	lim := quota.Limits{APIKeys: 5}
	for range lim.APIKeys - free {
		if _, _, err := accounts.CreateAPIKey(ctx, pool, lim, owner.ID, owner.Project, accounts.NewAPIKey{Name: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	// Each create holds a connection of its own before any starts, so
	// they overlap.
	var wg sync.WaitGroup
	errs := make(chan error, 3*free)
	start := make(chan struct{})
	for range cap(errs) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			close(start)
			wg.Wait()
			t.Fatal(err)
		}
		wg.Go(func() {
			defer conn.Release()
			<-start
			_, _, err := accounts.CreateAPIKey(ctx, conn, lim, owner.ID, owner.Project, accounts.NewAPIKey{Name: "racing"})
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	created := 0
	for err := range errs {
		var exceeded *quota.ExceededError
		switch {
		case err == nil:
			created++
		case !errors.As(err, &exceeded):
			t.Fatal(err)
		}
	}
	keys, err := accounts.ListAPIKeys(ctx, pool, owner.Project)
	if created != free || err != nil || len(keys) != lim.APIKeys {
		t.Fatalf("%d racing creates made %d keys (%d stored, %v), want %d", cap(errs), created, len(keys), err, free)
	}
}

func TestListAndDeleteAPIKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	owner, other := dbtest.User(t, tx, nil), dbtest.User(t, tx, nil)
	older, _, err := accounts.CreateAPIKey(ctx, tx, quota.Limits{}, owner.ID, owner.Project, accounts.NewAPIKey{Name: "older"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE api_keys SET created_at = created_at - interval '1 hour' WHERE id = $1`, older.ID); err != nil {
		t.Fatal(err)
	}
	newer, _, err := accounts.CreateAPIKey(ctx, tx, quota.Limits{}, owner.ID, owner.Project, accounts.NewAPIKey{Name: "newer"})
	if err != nil {
		t.Fatal(err)
	}
	theirs, _, err := accounts.CreateAPIKey(ctx, tx, quota.Limits{}, other.ID, other.Project, accounts.NewAPIKey{Name: "theirs"})
	if err != nil {
		t.Fatal(err)
	}

	keys, err := accounts.ListAPIKeys(ctx, tx, owner.Project)
	if err != nil || len(keys) != 2 || keys[0].ID != newer.ID || keys[1].ID != older.ID {
		t.Fatalf("ListAPIKeys = %+v, %v; want newer then older", keys, err)
	}
	if err := accounts.DeleteAPIKey(ctx, tx, owner.Project, theirs.ID); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Fatalf("deleting another account's key: %v, want ErrAPIKeyNotFound", err)
	}
	if err := accounts.DeleteAPIKey(ctx, tx, owner.Project, older.ID); err != nil {
		t.Fatal(err)
	}
	if err := accounts.DeleteAPIKey(ctx, tx, owner.Project, older.ID); !errors.Is(err, accounts.ErrAPIKeyNotFound) || !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("deleting it again: %v, want ErrAPIKeyNotFound", err)
	}
	if keys, err := accounts.ListAPIKeys(ctx, tx, other.Project); err != nil || len(keys) != 1 || keys[0].ID != theirs.ID {
		t.Fatalf("the other account's keys: %+v, %v", keys, err)
	}
}

func TestAuthenticateAPIKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	create := func(t *testing.T, q db.DB, owner string, k accounts.NewAPIKey) (accounts.APIKey, string) {
		t.Helper()
		project, err := accounts.PersonalProject(ctx, q, owner)
		if err != nil {
			t.Fatal(err)
		}
		key, secret, err := accounts.CreateAPIKey(ctx, q, quota.Limits{}, owner, project, k)
		if err != nil {
			t.Fatal(err)
		}
		return key, secret
	}

	t.Run("acts as its owner and records its use", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		owner := dbtest.User(t, tx, nil)
		key, secret := create(t, tx, owner.ID, accounts.NewAPIKey{Name: "k"})
		h, err := accounts.AuthenticateAPIKey(ctx, tx, secret)
		want := accounts.KeyHolder{KeyID: key.ID, UserID: owner.ID, Role: accounts.RoleUser, Scopes: key.Scopes}
		if err != nil || h.KeyID != want.KeyID || h.UserID != want.UserID || h.Role != want.Role || !slices.Equal(h.Scopes, want.Scopes) {
			t.Fatalf("AuthenticateAPIKey = %+v, %v; want %+v", h, err, want)
		}
		if keys, err := accounts.ListAPIKeys(ctx, tx, owner.Project); err != nil || keys[0].LastUsedAt == nil {
			t.Fatalf("last use not recorded: %+v, %v", keys, err)
		}
	})

	t.Run("admin powers need the admin scope", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		admin := dbtest.User(t, tx, &dbtest.UserOpts{Role: accounts.RoleAdmin})
		_, plain := create(t, tx, admin.ID, accounts.NewAPIKey{Name: "plain"})
		_, full := create(t, tx, admin.ID, accounts.NewAPIKey{Name: "full", Scopes: []string{accounts.ScopeAdmin}})
		if h, err := accounts.AuthenticateAPIKey(ctx, tx, plain); err != nil || h.Role != accounts.RoleUser {
			t.Fatalf("an admin's key without the admin scope: %+v, %v; want role user", h, err)
		}
		if h, err := accounts.AuthenticateAPIKey(ctx, tx, full); err != nil || h.Role != accounts.RoleAdmin {
			t.Fatalf("an admin's key with the admin scope: %+v, %v; want role admin", h, err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		owner := dbtest.User(t, tx, nil)
		past := time.Now().Add(-time.Minute)
		_, expired := create(t, tx, owner.ID, accounts.NewAPIKey{Name: "expired", ExpiresAt: &past})
		revokedKey, revoked := create(t, tx, owner.ID, accounts.NewAPIKey{Name: "revoked"})
		if err := accounts.DeleteAPIKey(ctx, tx, owner.Project, revokedKey.ID); err != nil {
			t.Fatal(err)
		}
		_, disabledOwner := create(t, tx, dbtest.User(t, tx, &dbtest.UserOpts{Disabled: true}).ID, accounts.NewAPIKey{Name: "k"})
		for _, tc := range []struct {
			name, secret, want string
		}{
			{"empty", "sbk_", accounts.ErrAPIKeyMalformed.Error()},
			{"short", "sbk_short", accounts.ErrAPIKeyMalformed.Error()},
			{"not base64url", "sbk_" + strings.Repeat("!", 43), accounts.ErrAPIKeyMalformed.Error()},
			{"another prefix", "sbx_" + revoked[4:], accounts.ErrAPIKeyMalformed.Error()},
			{"unknown", "sbk_" + strings.Repeat("A", 43), accounts.ErrAPIKeyUnknown.Error()},
			{"revoked", revoked, accounts.ErrAPIKeyUnknown.Error()},
			{"expired", expired, "this API key expired at " + past.UTC().Format(time.RFC3339)},
			{"owner disabled", disabledOwner, accounts.ErrAccountDisabled.Error()},
		} {
			_, err := accounts.AuthenticateAPIKey(ctx, tx, tc.secret)
			var refused *accounts.RefusedError
			if !errors.As(err, &refused) || err.Error() != tc.want {
				t.Errorf("%s: %v, want the refusal %q", tc.name, err, tc.want)
			}
		}
	})
}
