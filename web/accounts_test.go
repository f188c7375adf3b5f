package web

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// TestLookAlikeEmails: the address of an admin cannot be registered again
// under a Unicode look-alike, and registering never makes anyone an admin.
func TestLookAlikeEmails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, opsID := b.registerAdmin(t, "ops@example.com")
	for _, email := range []string{"opſ@example.com", "OPſ@example.com", "o\u212aps@example.com", "ops@exämple.com"} {
		res := b.do(t, http.MethodPost, "/v1/auth/register", map[string]string{"email": email, "password": "correct horse"}, "")
		requireProblem(t, res, http.StatusUnprocessableEntity)
		if !strings.Contains(string(res.raw), "ASCII") {
			t.Fatalf("%s: the refusal should say why: %s", email, res.raw)
		}
		// Nor does it log in to the admin account with the admin's password.
		requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": email, "password": "correct horse"}, ""), http.StatusUnauthorized)
	}
	requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/register", map[string]string{"email": " OPS@Example.COM ", "password": "correct horse"}, ""), http.StatusConflict)
	res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "OPS@example.com", "password": "correct horse"}, "")
	if res.status != http.StatusOK || res.body["user"].(map[string]any)["id"] != opsID {
		t.Fatalf("login in another case: %d %s", res.status, res.raw)
	}
	// A listed-looking address registers as a plain user.
	res = b.do(t, http.MethodPost, "/v1/auth/register", map[string]string{"email": "admin@example.com", "password": "correct horse"}, "")
	if res.status != http.StatusCreated || res.body["user"].(map[string]any)["role"] != "user" {
		t.Fatalf("register: %d %s", res.status, res.raw)
	}
}

// TestRoleIsReadOnEveryRequest: a token made while its user was not an admin
// works as an admin's once the role is granted, and stops at once when it is
// revoked — the token's role claim decides nothing.
func TestRoleIsReadOnEveryRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "promoted@example.com")
	requireProblem(t, b.do(t, http.MethodGet, "/v1/admin/users", nil, token), http.StatusForbidden)
	grant(t, b, "promoted@example.com", accounts.RoleAdmin)
	if res := b.do(t, http.MethodGet, "/v1/admin/users", nil, token); res.status != http.StatusOK {
		t.Fatalf("after grant: %d %s", res.status, res.raw)
	}
	adminToken := b.loginToken(t, "promoted@example.com")
	grant(t, b, "promoted@example.com", accounts.RoleUser)
	requireProblem(t, b.do(t, http.MethodGet, "/v1/admin/users", nil, adminToken), http.StatusForbidden)
	if me := b.do(t, http.MethodGet, "/v1/me", nil, adminToken); me.body["role"] != "user" {
		t.Fatalf("me after revoke: %s", me.raw)
	}
}

func grant(t *testing.T, b *testBundle, email, role string) {
	t.Helper()
	if _, err := accounts.UpdateUserByEmail(context.Background(), b.server.opts.Pool, email, accounts.UserChange{Role: &role}); err != nil {
		t.Fatal(err)
	}
}

func (b *testBundle) loginToken(t *testing.T, email string) string {
	t.Helper()
	res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": email, "password": "correct horse"}, "")
	if res.status != http.StatusOK {
		t.Fatalf("login %s: %d %s", email, res.status, res.raw)
	}
	return res.body["token"].(string)
}

// TestDisabledAndDeletedAccounts: their tokens are refused on every
// authenticated route with a 401 (a task create used to answer 500), and a
// disabled account cannot log in.
func TestDisabledAndDeletedAccounts(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	admin, _ := b.registerAdmin(t, "boss@example.com")
	routes := func(t *testing.T, token, want string) {
		t.Helper()
		for _, r := range []struct{ method, path string }{
			{http.MethodGet, "/v1/me"}, {http.MethodGet, "/v1/tasks"}, {http.MethodPost, "/v1/tasks"},
		} {
			var body any
			if r.method == http.MethodPost {
				body = webhookTask("after")
			}
			res := b.do(t, r.method, r.path, body, token)
			requireProblem(t, res, http.StatusUnauthorized)
			if !strings.Contains(res.body["detail"].(string), want) {
				t.Fatalf("%s %s: %s", r.method, r.path, res.raw)
			}
		}
	}
	t.Run("disabled", func(t *testing.T) {
		t.Parallel()
		token, id := b.register(t, "disabled@example.com")
		b.createTask(t, token, webhookTask("before"))
		res := b.do(t, http.MethodPatch, "/v1/admin/users/"+id, map[string]any{"disabled": true}, admin)
		if res.status != http.StatusOK || res.body["disabled"] != true {
			t.Fatalf("disable: %d %s", res.status, res.raw)
		}
		routes(t, token, "disabled")
		requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "disabled@example.com", "password": "correct horse"}, ""), http.StatusUnauthorized)
		if res := b.do(t, http.MethodPatch, "/v1/admin/users/"+id, map[string]any{"disabled": false}, admin); res.status != http.StatusOK || res.body["disabled"] != false {
			t.Fatalf("enable: %d %s", res.status, res.raw)
		}
		if res := b.do(t, http.MethodGet, "/v1/tasks", nil, token); res.status != http.StatusOK {
			t.Fatalf("enabled again: %d %s", res.status, res.raw)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		t.Parallel()
		token, id := b.register(t, "deleted@example.com")
		if _, err := b.server.opts.Pool.Exec(context.Background(), `DELETE FROM users WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		routes(t, token, "no longer exists")
	})
}

func TestAdminUsersAPI(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	admin, adminID := b.registerAdmin(t, "boss@example.com")
	t.Run("grant and revoke", func(t *testing.T) {
		t.Parallel()
		token, id := b.register(t, "helper@example.com")
		res := b.do(t, http.MethodPatch, "/v1/admin/users/"+strings.ToUpper(id), map[string]any{"role": "admin"}, admin)
		if res.status != http.StatusOK || res.body["role"] != "admin" || res.body["id"] != id {
			t.Fatalf("grant: %d %s", res.status, res.raw)
		}
		if res := b.do(t, http.MethodGet, "/v1/cluster/status", nil, token); res.status != http.StatusOK {
			t.Fatalf("granted admin: %d %s", res.status, res.raw)
		}
		if res := b.do(t, http.MethodPatch, "/v1/admin/users/"+id, map[string]any{"role": "user"}, admin); res.body["role"] != "user" {
			t.Fatalf("revoke: %d %s", res.status, res.raw)
		}
		requireProblem(t, b.do(t, http.MethodGet, "/v1/cluster/status", nil, token), http.StatusForbidden)
	})
	t.Run("disabling closes the account's sockets", func(t *testing.T) {
		t.Parallel()
		_, id := b.register(t, "connected@example.com")
		b.sockets.mu.Lock()
		b.sockets.lobby[id] = 2
		b.sockets.mu.Unlock()
		if res := b.do(t, http.MethodPatch, "/v1/admin/users/"+id, map[string]any{"disabled": true}, admin); res.status != http.StatusOK {
			t.Fatalf("disable: %d %s", res.status, res.raw)
		}
		b.sockets.mu.Lock()
		defer b.sockets.mu.Unlock()
		if _, still := b.sockets.lobby[id]; still {
			t.Fatal("the disabled account's sockets are still open")
		}
	})
	t.Run("an admin cannot disable themself", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, b.do(t, http.MethodPatch, "/v1/admin/users/"+adminID, map[string]any{"disabled": true}, admin), http.StatusConflict)
	})
	t.Run("an empty change writes nothing", func(t *testing.T) {
		t.Parallel()
		_, id := b.register(t, "unchanged@example.com")
		before := updatedAt(t, b.testBundle, id)
		res := b.do(t, http.MethodPatch, "/v1/admin/users/"+id, map[string]any{}, admin)
		if res.status != http.StatusOK || res.body["email"] != "unchanged@example.com" {
			t.Fatalf("empty patch: %d %s", res.status, res.raw)
		}
		if res := b.do(t, http.MethodPatch, "/v1/admin/users/"+id, map[string]any{"role": "user", "disabled": false}, admin); res.status != http.StatusOK {
			t.Fatalf("same values: %d %s", res.status, res.raw)
		}
		if after := updatedAt(t, b.testBundle, id); !after.Equal(before) {
			t.Fatalf("updated_at moved from %v to %v", before, after)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, b.do(t, http.MethodPatch, "/v1/admin/users/"+uuid.NewString(), map[string]any{"role": "admin"}, admin), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodGet, "/v1/admin/users/"+uuid.NewString(), nil, admin), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodPatch, "/v1/admin/users/"+adminID, map[string]any{"role": "root"}, admin), http.StatusUnprocessableEntity)
		requireProblem(t, b.do(t, http.MethodPatch, "/v1/admin/users/nope", map[string]any{"role": "admin"}, admin), http.StatusUnprocessableEntity)
		requireProblem(t, b.do(t, http.MethodGet, "/v1/admin/users?cursor=nope", nil, admin), http.StatusUnprocessableEntity)
	})
	t.Run("find by email and page", func(t *testing.T) {
		t.Parallel()
		_, id := b.register(t, "findme@example.com")
		res := b.do(t, http.MethodGet, "/v1/admin/users?email=FindMe@Example.com", nil, admin)
		items, _ := res.body["items"].([]any)
		if res.status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["id"] != id {
			t.Fatalf("by email: %d %s", res.status, res.raw)
		}
		if res := b.do(t, http.MethodGet, "/v1/admin/users?email=opſ@example.com", nil, admin); res.status != http.StatusOK || len(res.body["items"].([]any)) != 0 {
			t.Fatalf("unknown email: %d %s", res.status, res.raw)
		}
		seen := map[string]bool{}
		cursor := ""
		for range 20 {
			res := b.do(t, http.MethodGet, "/v1/admin/users?limit=1&cursor="+cursor, nil, admin)
			for _, it := range res.body["items"].([]any) {
				seen[it.(map[string]any)["id"].(string)] = true
			}
			next, _ := res.body["next_cursor"].(string)
			if cursor = next; cursor == "" {
				break
			}
		}
		if !seen[id] || !seen[adminID] {
			t.Fatalf("paging missed accounts: %v", seen)
		}

	})
}

func updatedAt(t *testing.T, b *testBundle, id string) time.Time {
	t.Helper()
	var at time.Time
	if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT updated_at FROM users WHERE id = $1`, id).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// TestOperatorRoutesRefuseNonAdminsFirst: a non-admin gets 403 on every
// operator route whatever its path and body, never a 422 about them.
func TestOperatorRoutesRefuseNonAdminsFirst(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	user, _ := b.register(t, "curious@example.com")
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/admin/users/not-a-uuid/disconnect", ""},
		{http.MethodPost, "/v1/admin/nodes/nope/drain", ""},
		{http.MethodGet, "/v1/admin/users?limit=100000", ""},
		{http.MethodGet, "/v1/admin/users/not-a-uuid", ""},
		{http.MethodPatch, "/v1/admin/users/not-a-uuid", `{"role":"root","extra":1}`},
		{http.MethodPatch, "/v1/admin/users/" + uuid.NewString(), `{"role":"admin"}`},
		{http.MethodGet, "/v1/cluster/status", ""},
	} {
		var body any
		if r.body != "" {
			body = r.body
		}
		res := b.do(t, r.method, r.path, body, user)
		requireProblem(t, res, http.StatusForbidden)
	}
}

// TestDisabledAccountTicket: a ticket issued before the account was disabled
// does not open a socket.
func TestDisabledAccountTicket(t *testing.T) {
	t.Parallel()
	b := setupRealtime(t)
	admin, _ := b.registerAdmin(t, "boss-ws@example.com")
	token, id := b.register(t, "ws-disabled@example.com")
	ticket := b.ticket(t, token)
	if res := b.do(t, http.MethodPatch, "/v1/admin/users/"+id, map[string]any{"disabled": true}, admin); res.status != http.StatusOK {
		t.Fatalf("disable: %d %s", res.status, res.raw)
	}
	conn, res, err := websocket.DefaultDialer.Dial(b.wsURL(ticket), nil)
	if err == nil {
		conn.Close()
		t.Fatal("a disabled account opened a socket")
	}
	requireRawProblem(t, res, http.StatusUnauthorized)
	requireProblem(t, b.do(t, http.MethodPost, "/v1/ws/ticket", nil, token), http.StatusUnauthorized)
}

// TestRiverUIReadsTheRoleEveryRequest: basic auth successes are cached, the
// role and account state are not.
func TestRiverUIReadsTheRoleEveryRequest(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	b.registerAdmin(t, "boss@example.com")
	get := func() int {
		req := httptest.NewRequest(http.MethodGet, "/riverui/", nil)
		req.SetBasicAuth("boss@example.com", "correct horse")
		rec := httptest.NewRecorder()
		b.server.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("admin: %d", code)
	}
	grant(t, b, "boss@example.com", accounts.RoleUser)
	if code := get(); code != http.StatusForbidden {
		t.Fatalf("after revoke: %d, want 403", code)
	}
	grant(t, b, "boss@example.com", accounts.RoleAdmin)
	disabled := true
	if _, err := accounts.UpdateUserByEmail(context.Background(), b.server.opts.Pool, "boss@example.com", accounts.UserChange{Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	if code := get(); code != http.StatusUnauthorized {
		t.Fatalf("after disable: %d, want 401", code)
	}
}

// TestRequestLogHasTheClientAddress: the log holds the whole address, not the
// /64 the rate limit counts.
func TestRequestLogHasTheClientAddress(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	// Requests are logged at debug.
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := New(Options{Pool: dbtest.NewPool(t), Registry: prometheus.NewRegistry(), Logger: logger})
	req := httptest.NewRequest(http.MethodGet, "/healthz/live", nil)
	req.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:4000"
	s.ServeHTTP(httptest.NewRecorder(), req)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log: %v %s", err, buf.Bytes())
	}
	if line["client_ip"] != "2001:db8:1:2:3:4:5:6" {
		t.Fatalf("client_ip = %v, want the whole address", line["client_ip"])
	}
	if got := clientIP(req.Context(), req.RemoteAddr); got == "2001:db8:1:2:3:4:5:6" {
		t.Fatalf("the rate limit key should be the /64, got %s", got)
	}
}

// TestAdminUserPagesSurviveDeletes: the cursor is a position, so a page
// after an account deleted since goes on with the next account (a cursor
// naming the account answered an empty last page).
func TestAdminUserPagesSurviveDeletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin, _ := b.registerAdmin(t, "boss@example.com")
	_, gone := b.register(t, "gone@example.com")
	_, kept := b.register(t, "kept@example.com")
	first := b.do(t, http.MethodGet, "/v1/admin/users?limit=2", nil, admin)
	items, cursor := first.body["items"].([]any), first.body["next_cursor"]
	if len(items) != 2 || items[1].(map[string]any)["id"] != gone || cursor == nil {
		t.Fatalf("first page: %s", first.raw)
	}
	if _, err := b.server.opts.Pool.Exec(context.Background(), `DELETE FROM users WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}
	next := b.do(t, http.MethodGet, "/v1/admin/users?limit=2&cursor="+cursor.(string), nil, admin)
	if items := next.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != kept || next.body["next_cursor"] != nil {
		t.Fatalf("page after a deleted account: %s", next.raw)
	}
	// A page that holds exactly the rest ends the listing: next_cursor is
	// null, not a cursor to an empty page.
	if exact := b.do(t, http.MethodGet, "/v1/admin/users?limit=2", nil, admin); len(exact.body["items"].([]any)) != 2 || exact.body["next_cursor"] != nil {
		t.Fatalf("full last page: %s", exact.raw)
	}
}
