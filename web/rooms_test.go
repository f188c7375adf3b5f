package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime"
)

func setupRooms(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	return &testBundle{server: New(Options{
		Pool: pool, Registry: prometheus.NewRegistry(), PublicAPI: true, JWTSecret: testSecret, BcryptCost: 4,
		RateLimits: RateLimits{Auth: generous, User: generous}, Rooms: realtime.Rooms{DB: pool}, History: realtime.Streams{DB: pool},
	})}
}

func roomPath(name, rest string) string { return "/v1/rooms/" + url.PathEscape(name) + rest }

func TestRoomRoutes(t *testing.T) {
	t.Parallel()

	t.Run("create, read, change, delete by the owner", func(t *testing.T) {
		t.Parallel()
		b := setupRooms(t)
		owner, ownerID := b.register(t, "owner@example.com")
		other, _ := b.register(t, "other@example.com")
		for _, name := range []string{"team/ops", "café 50%", "a"} {
			res := b.do(t, http.MethodPost, "/v1/rooms", map[string]string{"name": name, "visibility": "members"}, owner)
			if res.status != http.StatusCreated || res.body["name"] != name || res.body["owner_id"] != ownerID || res.body["visibility"] != "members" {
				t.Fatalf("create %q: %d %s", name, res.status, res.raw)
			}
			if res := b.do(t, http.MethodGet, roomPath(name, ""), nil, owner); res.status != http.StatusOK || res.body["name"] != name {
				t.Fatalf("get %q: %d %s", name, res.status, res.raw)
			}
			requireProblem(t, b.do(t, http.MethodGet, roomPath(name, ""), nil, other), http.StatusForbidden)
		}
		requireProblem(t, b.do(t, http.MethodPost, "/v1/rooms", map[string]string{"name": "a", "visibility": "open"}, other), http.StatusConflict)
		requireProblem(t, b.do(t, http.MethodPatch, roomPath("a", ""), map[string]string{"visibility": "open"}, other), http.StatusForbidden)
		if res := b.do(t, http.MethodPatch, roomPath("a", ""), map[string]string{"visibility": "open"}, owner); res.status != http.StatusOK || res.body["visibility"] != "open" {
			t.Fatalf("patch: %d %s", res.status, res.raw)
		}
		if res := b.do(t, http.MethodGet, roomPath("a", ""), nil, other); res.status != http.StatusOK {
			t.Fatalf("an open room to others: %d %s", res.status, res.raw)
		}
		requireProblem(t, b.do(t, http.MethodDelete, roomPath("a", ""), nil, other), http.StatusForbidden)
		if res := b.do(t, http.MethodDelete, roomPath("a", ""), nil, owner); res.status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", res.status, res.raw)
		}
		requireProblem(t, b.do(t, http.MethodGet, roomPath("a", ""), nil, owner), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodDelete, roomPath("a", ""), nil, owner), http.StatusNotFound)
	})

	t.Run("an admin manages any room", func(t *testing.T) {
		t.Parallel()
		b := setupRooms(t)
		owner, _ := b.register(t, "owner@example.com")
		admin, _ := b.registerAdmin(t, "boss@example.com")
		_, userID := b.register(t, "user@example.com")
		b.do(t, http.MethodPost, "/v1/rooms", map[string]string{"name": "r", "visibility": "members"}, owner)
		for _, r := range []struct {
			method, path string
			body         any
			want         int
		}{
			{http.MethodGet, roomPath("r", ""), nil, http.StatusOK},
			{http.MethodPut, roomPath("r", "/members/"+userID), nil, http.StatusOK},
			{http.MethodGet, roomPath("r", "/members"), nil, http.StatusOK},
			{http.MethodDelete, roomPath("r", "/members/"+userID), nil, http.StatusNoContent},
			{http.MethodPatch, roomPath("r", ""), map[string]string{"visibility": "open"}, http.StatusOK},
			{http.MethodDelete, roomPath("r", ""), nil, http.StatusNoContent},
		} {
			if res := b.do(t, r.method, r.path, r.body, admin); res.status != r.want {
				t.Fatalf("%s %s: %d %s", r.method, r.path, res.status, res.raw)
			}
		}
	})

	t.Run("members: add, list in pages, remove; the owner stays", func(t *testing.T) {
		t.Parallel()
		b := setupRooms(t)
		owner, ownerID := b.register(t, "owner@example.com")
		member, _ := b.register(t, "member@example.com")
		b.do(t, http.MethodPost, "/v1/rooms", map[string]string{"name": "r", "visibility": "members"}, owner)
		want := []string{ownerID}
		for i := range 4 {
			_, id := b.register(t, "m"+string(rune('a'+i))+"@example.com")
			if res := b.do(t, http.MethodPut, roomPath("r", "/members/"+strings.ToUpper(id)), nil, owner); res.status != http.StatusOK || res.body["user_id"] != id {
				t.Fatalf("put: %d %s", res.status, res.raw)
			}
			b.do(t, http.MethodPut, roomPath("r", "/members/"+id), nil, owner) // again: unchanged
			want = append(want, id)
		}
		requireProblem(t, b.do(t, http.MethodPut, roomPath("r", "/members/"+uuid.NewString()), nil, owner), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodPut, roomPath("nope", "/members/"+ownerID), nil, owner), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodPut, roomPath("r", "/members/"+ownerID), nil, member), http.StatusForbidden)
		requireProblem(t, b.do(t, http.MethodGet, roomPath("r", "/members"), nil, member), http.StatusForbidden)

		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			res := b.do(t, http.MethodGet, roomPath("r", "/members?limit=2&cursor="+url.QueryEscape(cursor)), nil, owner)
			if res.status != http.StatusOK || pages > 3 {
				t.Fatalf("page %d: %d %s", pages, res.status, res.raw)
			}
			for _, it := range res.body["items"].([]any) {
				got = append(got, it.(map[string]any)["user_id"].(string))
			}
			next, _ := res.body["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("members %v, want %v", got, want)
		}
		requireProblem(t, b.do(t, http.MethodGet, roomPath("r", "/members?cursor=bogus"), nil, owner), http.StatusUnprocessableEntity)
		requireProblem(t, b.do(t, http.MethodDelete, roomPath("r", "/members/"+ownerID), nil, owner), http.StatusConflict)
		if res := b.do(t, http.MethodDelete, roomPath("r", "/members/"+want[1]), nil, owner); res.status != http.StatusNoContent {
			t.Fatalf("remove: %d %s", res.status, res.raw)
		}
	})

	t.Run("bad input is a 4xx problem", func(t *testing.T) {
		t.Parallel()
		b := setupRooms(t)
		owner, _ := b.register(t, "owner@example.com")
		for _, body := range []any{
			map[string]string{"name": " ", "visibility": "open"},
			map[string]string{"name": "a\x01", "visibility": "open"},
			map[string]string{"name": strings.Repeat("r", 129), "visibility": "open"},
			map[string]string{"name": "r", "visibility": "secret"},
			map[string]string{"name": "r"},
			`{"name":"r","visibility":"open","extra":1}`,
		} {
			requireProblem(t, b.do(t, http.MethodPost, "/v1/rooms", body, owner), http.StatusUnprocessableEntity)
		}
		for _, path := range []string{roomPath(" lobby", ""), roomPath("a\x01b", ""), "/v1/rooms/%ff", roomPath(strings.Repeat("r", 129), "/members")} {
			requireProblem(t, b.do(t, http.MethodGet, path, nil, owner), http.StatusUnprocessableEntity)
		}
		requireProblem(t, b.do(t, http.MethodPut, roomPath("r", "/members/not-a-uuid"), nil, owner), http.StatusUnprocessableEntity)
		requireProblem(t, b.do(t, http.MethodGet, roomPath("r", ""), nil, ""), http.StatusUnauthorized)
	})

	t.Run("members-only rooms refuse non-members' events, history and publish tasks", func(t *testing.T) {
		t.Parallel()
		b := setupRooms(t)
		owner, _ := b.register(t, "owner@example.com")
		other, _ := b.register(t, "other@example.com")
		b.do(t, http.MethodPost, "/v1/rooms", map[string]string{"name": "vault", "visibility": "members"}, owner)
		requireProblem(t, b.do(t, http.MethodGet, "/v1/history?stream="+url.QueryEscape("room:vault"), nil, other), http.StatusForbidden)
		task := map[string]any{"name": "leak", "schedule": "@hourly", "action": map[string]any{"type": "publish", "event": "leak", "room": "vault"}}
		requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks", task, other), http.StatusForbidden)
		if res := b.do(t, http.MethodPost, "/v1/tasks", task, owner); res.status != http.StatusCreated {
			t.Fatalf("the owner's task: %d %s", res.status, res.raw)
		}
		res := b.do(t, http.MethodPost, "/v1/tasks", map[string]any{"name": "ok", "schedule": "@hourly", "action": map[string]any{"type": "publish", "event": "x"}}, other)
		if res.status != http.StatusCreated {
			t.Fatalf("task: %d %s", res.status, res.raw)
		}
		requireProblem(t, b.do(t, http.MethodPatch, "/v1/tasks/"+res.body["id"].(string), map[string]any{"action": map[string]any{"type": "publish", "event": "x", "room": "vault"}}, other), http.StatusForbidden)
	})
}
