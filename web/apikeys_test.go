package web

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/realtime"
)

// createKey makes an API key with a user token and returns the answer.
func (b *testBundle) createKey(t *testing.T, token string, body map[string]any) map[string]any {
	t.Helper()
	res := b.do(t, http.MethodPost, "/v1/api-keys", body, token)
	if res.status != http.StatusCreated {
		t.Fatalf("create key %v: %d %s", body, res.status, res.raw)
	}
	return res.body
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, userID := b.register(t, "keys@example.com")

	t.Run("created once, listed without the secret, accepted as its owner", func(t *testing.T) {
		t.Parallel()
		tok, id := b.register(t, "keys-list@example.com")
		k := b.createKey(t, tok, map[string]any{"name": "ci"})
		secret := k["secret"].(string)
		if !regexp.MustCompile(`^sbk_[A-Za-z0-9_-]{43}$`).MatchString(secret) || k["prefix"] != secret[:12] {
			t.Fatalf("secret %q prefix %v", secret, k["prefix"])
		}
		if scopes := k["scopes"].([]any); len(scopes) != 2 || scopes[0] != "read" || scopes[1] != "write" || k["last_used_at"] != nil || k["expires_at"] != nil {
			t.Fatalf("defaults: %v", k)
		}
		me := b.do(t, http.MethodGet, "/v1/me", nil, secret)
		if me.status != http.StatusOK || me.body["id"] != id {
			t.Fatalf("me by key: %d %s", me.status, me.raw)
		}
		list := b.do(t, http.MethodGet, "/v1/api-keys", nil, tok)
		items := list.body["items"].([]any)
		if list.status != http.StatusOK || len(items) != 1 || strings.Contains(string(list.raw), secret) || strings.Contains(string(list.raw), "secret") {
			t.Fatalf("list: %d %s", list.status, list.raw)
		}
		if items[0].(map[string]any)["last_used_at"] == nil {
			t.Fatalf("last_used_at not recorded: %s", list.raw)
		}
		var stored []byte
		if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT secret_hash FROM api_keys WHERE id = $1`, k["id"]).Scan(&stored); err != nil || len(stored) != 32 {
			t.Fatalf("stored hash: %x %v", stored, err)
		}
	})

	t.Run("revoked: refused from the next request", func(t *testing.T) {
		t.Parallel()
		secret := b.createKey(t, token, map[string]any{"name": "revoke me"})
		id := ""
		for _, it := range b.do(t, http.MethodGet, "/v1/api-keys", nil, token).body["items"].([]any) {
			if it.(map[string]any)["name"] == "revoke me" {
				id = it.(map[string]any)["id"].(string)
			}
		}
		if res := b.do(t, http.MethodGet, "/v1/tasks", nil, secret["secret"].(string)); res.status != http.StatusOK {
			t.Fatalf("before revoke: %d %s", res.status, res.raw)
		}
		if res := b.do(t, http.MethodDelete, "/v1/api-keys/urn:uuid:"+strings.ToUpper(id), nil, token); res.status != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", res.status, res.raw)
		}
		res := b.do(t, http.MethodGet, "/v1/tasks", nil, secret["secret"].(string))
		requireProblem(t, res, http.StatusUnauthorized)
		if !strings.Contains(res.body["detail"].(string), "revoked") {
			t.Fatalf("detail: %s", res.raw)
		}
		requireProblem(t, b.do(t, http.MethodDelete, "/v1/api-keys/"+id, nil, token), http.StatusNotFound)
	})

	t.Run("another user's key is not found", func(t *testing.T) {
		t.Parallel()
		k := b.createKey(t, token, map[string]any{"name": "mine"})
		other, _ := b.register(t, "keys-other@example.com")
		requireProblem(t, b.do(t, http.MethodDelete, "/v1/api-keys/"+k["id"].(string), nil, other), http.StatusNotFound)
		if res := b.do(t, http.MethodGet, "/v1/me", nil, k["secret"].(string)); res.status != http.StatusOK || res.body["id"] != userID {
			t.Fatalf("key after another user's revoke: %d %s", res.status, res.raw)
		}
	})

	t.Run("read scope: GET only", func(t *testing.T) {
		t.Parallel()
		secret := b.createKey(t, token, map[string]any{"name": "reader", "scopes": []string{"read"}})["secret"].(string)
		if res := b.do(t, http.MethodGet, "/v1/tasks", nil, secret); res.status != http.StatusOK {
			t.Fatalf("read key GET: %d %s", res.status, res.raw)
		}
		res := b.do(t, http.MethodPost, "/v1/tasks", map[string]any{"name": "x", "schedule": "@hourly", "action": map[string]any{"type": "publish", "event": "tick"}}, secret)
		requireProblem(t, res, http.StatusForbidden)
		if !strings.Contains(res.body["detail"].(string), "needs write") {
			t.Fatalf("detail: %s", res.raw)
		}
		requireProblem(t, b.do(t, http.MethodDelete, "/v1/api-keys/00000000-0000-4000-8000-000000000000", nil, secret), http.StatusForbidden)
	})

	t.Run("a key cannot make keys", func(t *testing.T) {
		t.Parallel()
		secret := b.createKey(t, token, map[string]any{"name": "writer", "scopes": []string{"write"}})["secret"].(string)
		requireProblem(t, b.do(t, http.MethodPost, "/v1/api-keys", map[string]any{"name": "child"}, secret), http.StatusForbidden)
		// A key acts at most as a developer: keys are for admins.
		requireProblem(t, b.do(t, http.MethodGet, "/v1/api-keys", nil, secret), http.StatusForbidden)
	})

	t.Run("bad input", func(t *testing.T) {
		t.Parallel()
		for _, body := range []map[string]any{
			{},
			{"name": ""},
			{"name": "x", "scopes": []string{"delete"}},
			{"name": "x", "scopes": []string{}},
			{"name": "x", "expires_at": time.Now().Add(-time.Minute).Format(time.RFC3339)},
			{"name": strings.Repeat("n", 101)},
			{"name": "a\x00b"},
			{"name": "tab\there"},
		} {
			requireProblem(t, b.do(t, http.MethodPost, "/v1/api-keys", body, token), http.StatusUnprocessableEntity)
		}
		requireProblem(t, b.do(t, http.MethodDelete, "/v1/api-keys/not-a-uuid", nil, token), http.StatusUnprocessableEntity)
		for _, bad := range []string{"sbk_", "sbk_short", "sbk_" + strings.Repeat("!", 43), "sbk_" + strings.Repeat("A", 43)} {
			requireProblem(t, b.do(t, http.MethodGet, "/v1/me", nil, bad), http.StatusUnauthorized)
		}
	})

	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		k := b.createKey(t, token, map[string]any{"name": "soon", "expires_at": time.Now().Add(time.Hour).Format(time.RFC3339)})
		if _, err := b.server.opts.Pool.Exec(context.Background(), `UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, k["id"]); err != nil {
			t.Fatal(err)
		}
		res := b.do(t, http.MethodGet, "/v1/me", nil, k["secret"].(string))
		requireProblem(t, res, http.StatusUnauthorized)
		if !strings.Contains(res.body["detail"].(string), "expired") {
			t.Fatalf("detail: %s", res.raw)
		}
	})
}

// TestAPIKeyOwnerDisabled: a disabled owner's keys stop at once, and work
// again when the account is enabled.
func TestAPIKeyOwnerDisabled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "owner@example.com")
	secret := b.createKey(t, token, map[string]any{"name": "k"})["secret"].(string)
	disabled, enabled := true, false
	if _, err := accounts.UpdateUserByEmail(context.Background(), b.server.opts.Pool, "owner@example.com", accounts.UserChange{Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	res := b.do(t, http.MethodGet, "/v1/me", nil, secret)
	requireProblem(t, res, http.StatusUnauthorized)
	if res.body["detail"] != accounts.ErrAccountDisabled.Error() {
		t.Fatalf("detail: %s", res.raw)
	}
	if _, err := accounts.UpdateUserByEmail(context.Background(), b.server.opts.Pool, "owner@example.com", accounts.UserChange{Disabled: &enabled}); err != nil {
		t.Fatal(err)
	}
	if res := b.do(t, http.MethodGet, "/v1/me", nil, secret); res.status != http.StatusOK {
		t.Fatalf("after enable: %d %s", res.status, res.raw)
	}
}

// TestAPIKeyAdminScope: operator routes need the admin scope, which only an
// admin can grant a key, and the owner's role as stored now.
func TestAPIKeyAdminScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin, _ := b.registerAdmin(t, "key-admin@example.com")
	user, _ := b.register(t, "key-user@example.com")
	requireProblem(t, b.do(t, http.MethodPost, "/v1/api-keys", map[string]any{"name": "x", "scopes": []string{"admin"}}, user), http.StatusForbidden)

	plain := b.createKey(t, admin, map[string]any{"name": "plain"})["secret"].(string)
	res := b.do(t, http.MethodGet, "/v1/admin/users", nil, plain)
	requireProblem(t, res, http.StatusForbidden)
	if !strings.Contains(res.body["detail"].(string), "needs admin") {
		t.Fatalf("detail: %s", res.raw)
	}
	ops := b.createKey(t, admin, map[string]any{"name": "ops", "scopes": []string{"admin", "read"}})["secret"].(string)
	if res := b.do(t, http.MethodGet, "/v1/admin/users", nil, ops); res.status != http.StatusOK {
		t.Fatalf("admin key: %d %s", res.status, res.raw)
	}
	grant(t, b, "key-admin@example.com", accounts.RoleUser)
	requireProblem(t, b.do(t, http.MethodGet, "/v1/admin/users", nil, ops), http.StatusForbidden)
}

// TestAPIKeyRateLimit: a key spends its own bucket and its account's,
// which the account's tokens and all its keys share: a second key cannot
// add to the account's budget.
func TestAPIKeyRateLimit(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, RateLimits{Auth: generous, User: perMinute(6), APIKey: perMinute(4)})
	token, _ := b.register(t, "limited@example.com")
	secret := b.createKey(t, token, map[string]any{"name": "k"})["secret"].(string) // the account's 1st request
	other := b.createKey(t, token, map[string]any{"name": "k"})["secret"].(string)  // its 2nd
	exhaust(t, 4, func() response { return b.from(t, "198.51.100.1:1", nil, http.MethodGet, "/v1/me", nil, secret) })
	res := b.from(t, "198.51.100.1:1", nil, http.MethodGet, "/v1/me", nil, secret)
	requireTooMany(t, res, 4)
	if !strings.Contains(res.body["detail"].(string), "for this API key") {
		t.Fatalf("detail: %s", res.raw)
	}
	for name, cred := range map[string]string{"another key of the same account": other, "the account's token": token} {
		res := b.from(t, "198.51.100.1:1", nil, http.MethodGet, "/v1/me", nil, cred)
		requireTooMany(t, res, 6)
		if !strings.Contains(res.body["detail"].(string), "for this account") {
			t.Fatalf("%s: %s", name, res.raw)
		}
	}
}

// TestAPIKeyLimits: at most 100 keys per project (the api_keys quota,
// answered 409 naming it); the River UI takes none.
func TestAPIKeyLimits(t *testing.T) {
	t.Parallel()
	b := &testBundle{server: corsServer(t)} // with a River UI
	token, id := b.register(t, "many@example.com")
	secret := b.createKey(t, token, map[string]any{"name": "first"})["secret"].(string)
	_, err := b.server.opts.Pool.Exec(context.Background(), `
		INSERT INTO api_keys (user_id, name, prefix, secret_hash, scopes)
		SELECT $1::uuid, 'k' || i, 'sbk_', sha256(convert_to($1::text || i, 'UTF8')), '{read}' FROM generate_series(2, 100) i`, id)
	if err != nil {
		t.Fatal(err)
	}
	res := b.do(t, http.MethodPost, "/v1/api-keys", map[string]any{"name": "one too many"}, token)
	requireQuota(t, res, http.StatusConflict, "api_keys", 100, 100)
	if list := b.do(t, http.MethodGet, "/v1/api-keys", nil, token); len(list.body["items"].([]any)) != 100 {
		t.Fatalf("list: %d items", len(list.body["items"].([]any)))
	}
	ui := b.do(t, http.MethodGet, "/riverui/", nil, secret)
	requireProblem(t, ui, http.StatusUnauthorized)
	if !strings.Contains(ui.body["detail"].(string), "API keys") {
		t.Fatalf("River UI detail: %s", ui.raw)
	}
}

// TestAPIKeyAdminPowersNeedTheScope: an admin's key without the admin scope
// acts as a plain user outside the operator routes too (RPC to another
// user's clients), and one with it keeps the admin's powers; a write key
// gets WebSocket tickets and publishes events as its owner.
func TestAPIKeyAdminPowersNeedTheScope(t *testing.T) {
	t.Parallel()
	b := setupRealtime(t)
	admin, _ := b.registerAdmin(t, "rpc-key-admin@example.com")
	otherToken, other := b.register(t, "rpc-key-other@example.com")
	plain := b.createKey(t, admin, map[string]any{"name": "plain"})["secret"].(string)
	full := b.createKey(t, admin, map[string]any{"name": "full", "scopes": []string{"write", "admin"}})["secret"].(string)
	rpc := map[string]any{"method": "x"}
	requireProblem(t, b.do(t, http.MethodPost, "/v1/users/"+other+"/rpc", rpc, plain), http.StatusForbidden)
	conn := b.connect(t, otherToken)
	done := make(chan response, 1)
	go func() { done <- b.do(t, http.MethodPost, "/v1/users/"+other+"/rpc", rpc, full) }()
	f := readFrame(t, conn)
	if err := conn.WriteJSON(realtime.Frame{Event: "rpc.result", ID: f.ID, Payload: json.RawMessage(`"ok"`)}); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.status != http.StatusOK || res.body["result"] != "ok" {
		t.Fatalf("rpc by an admin key: %d %s", res.status, res.raw)
	}

	if res := b.do(t, http.MethodPost, "/v1/ws/ticket", nil, plain); res.status != http.StatusCreated {
		t.Fatalf("ticket by key: %d %s", res.status, res.raw)
	}
	if res := b.do(t, http.MethodPost, "/v1/events", map[string]any{"to": other, "event": "hello"}, plain); res.status != http.StatusAccepted {
		t.Fatalf("event by key: %d %s", res.status, res.raw)
	}
}

// TestAPIKeyScopesAreChecked: a repeated scope, or one that is not a string,
// is a 422 (Huma's uniqueItems check panicked on [["read"]]: a 500).
func TestAPIKeyScopesAreChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "scopes@example.com")
	for name, body := range map[string]string{
		"repeated":  `{"name":"k","scopes":["read","read"]}`,
		"nested":    `{"name":"k","scopes":[["read"]]}`,
		"deep":      `{"name":"k","scopes":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`,
		"an object": `{"name":"k","scopes":[{"read":true}]}`,
	} {
		res := b.do(t, http.MethodPost, "/v1/api-keys", body, token)
		if res.status != http.StatusUnprocessableEntity && res.status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", name, res.status, res.raw)
		}
	}
	if list := b.do(t, http.MethodGet, "/v1/api-keys", nil, token); len(list.body["items"].([]any)) != 0 {
		t.Fatalf("a refused request made a key: %s", list.raw)
	}
}
