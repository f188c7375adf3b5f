package web

import (
	"net/http"
	"strings"
	"testing"
)

// An admin-scope API key runs the operator routes but cannot grant a role,
// disable an account or make a password reset link: a leaked key must not
// leave a successor (an admin account, a taken-over one) behind its revoke.
// A signed-in admin can.
func TestAdminKeyCannotChangeAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin, _ := b.registerAdmin(t, "keys-admin@example.com")
	_, victim := b.register(t, "keys-victim@example.com")
	key := b.createKey(t, admin, map[string]any{"name": "ops", "scopes": []string{"admin", "read", "write"}})["secret"].(string)
	if res := b.do(t, http.MethodGet, "/v1/admin/users/"+victim, nil, key); res.status != http.StatusOK {
		t.Fatalf("the key reads accounts: %d %s", res.status, res.raw)
	}
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"grant admin", http.MethodPatch, "/v1/admin/users/" + victim, map[string]any{"role": "admin"}},
		{"disable", http.MethodPatch, "/v1/admin/users/" + victim, map[string]any{"disabled": true}},
		{"reset link", http.MethodPost, "/v1/admin/users/" + victim + "/password-reset", nil},
	} {
		res := b.do(t, c.method, c.path, c.body, key)
		requireProblem(t, res, http.StatusForbidden)
		if d, _ := res.body["detail"].(string); !strings.Contains(d, "signed-in") {
			t.Errorf("%s with an API key: %s", c.name, res.raw)
		}
	}
	if res := b.do(t, http.MethodGet, "/v1/admin/users/"+victim, nil, admin); res.body["role"] != "user" || res.body["disabled"] != false {
		t.Fatalf("refused changes changed the account: %s", res.raw)
	}
	if res := b.do(t, http.MethodPatch, "/v1/admin/users/"+victim, map[string]any{"role": "admin"}, admin); res.status != http.StatusOK || res.body["role"] != "admin" {
		t.Fatalf("a signed-in admin grants: %d %s", res.status, res.raw)
	}
}

// An Idempotency-Key's answer is replayed only to the credential that got
// it: another API key of the same account with the same key and body runs
// the request itself, with its own rights (a key cannot create keys), and
// never receives the first answer's secret.
func TestIdempotentReplayOnlyToTheSameCredential(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "replay-owner@example.com")
	writer := b.createKey(t, token, map[string]any{"name": "writer", "scopes": []string{"read", "write"}})["secret"].(string)
	const body = `{"name":"minted","scopes":["read","write"]}`
	first := b.post(t, "/v1/api-keys", body, token, "mint-1")
	if first.status != http.StatusCreated || first.body["secret"] == nil {
		t.Fatalf("first: %d %s", first.status, first.raw)
	}
	if again := b.post(t, "/v1/api-keys", body, token, "mint-1"); again.status != http.StatusCreated || again.body["secret"] != first.body["secret"] {
		t.Fatalf("the same token's retry is a replay: %d %s", again.status, again.raw)
	}
	other := b.post(t, "/v1/api-keys", body, writer, "mint-1")
	requireProblem(t, other, http.StatusForbidden)
	if strings.Contains(string(other.raw), first.body["secret"].(string)) || other.header.Get(replayedHeader) != "" {
		t.Fatalf("another credential got the first answer: %s", other.raw)
	}
}
