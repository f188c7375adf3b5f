package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime"
)

// setupEveryRoute is a server with every route of the public API: tasks and
// runs (River), realtime (hub and bus) and the operator routes (cluster).
func setupEveryRoute(t *testing.T, tweaks ...func(*Options)) *clusterBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rt := realtime.New(realtime.Options{
		Bus: realtime.BusOptions{Pool: pool, Registry: reg, FindUserTimeout: 300 * time.Millisecond}, Hub: &realtime.HubOptions{},
	})
	hub, bus := rt.Hub, rt.Bus
	if err := bus.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Stop)
	sockets := &oneRoomSockets{lobby: map[string]int{}}
	c := cluster.New(cluster.Options{DB: pool, NodeID: uuid.NewString(), Secret: testSecret, Sockets: sockets})
	opts := Options{
		Pool: pool, Registry: reg, PublicAPI: true, JWTSecret: testSecret, BcryptCost: 4,
		RateLimits: RateLimits{Auth: generous, User: generous},
		River:      client, Cluster: c, Presence: realtime.PresenceReader{DB: pool},
		Tickets: realtime.Tickets{DB: pool}, Sockets: hub, Events: bus, RPC: bus,
	}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	s := New(opts)
	return &clusterBundle{testBundle: &testBundle{server: s}, cluster: c, sockets: sockets}
}

// spellings of one UUID that must all name the same resource.
func spellings(id string) map[string]string {
	return map[string]string{
		"upper case":        strings.ToUpper(id),
		"urn":               "urn:uuid:" + id,
		"upper urn":         "URN:UUID:" + strings.ToUpper(id),
		"braces":            "{" + id + "}",
		"no hyphens":        strings.ReplaceAll(id, "-", ""),
		"already canonical": id,
	}
}

func TestIDsAreCanonicalised(t *testing.T) {
	t.Parallel()
	b := setupEveryRoute(t)
	admin, _ := b.registerAdmin(t, "boss@example.com")
	task := webhookTask("spelled")
	task["overlap"] = "allow"
	id := b.createTask(t, admin, task)["id"].(string)
	run := b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", nil, admin)
	if run.status != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", run.status, run.raw)
	}
	runID := run.body["id"].(string)

	for name, spelled := range spellings(id) {
		t.Run("task "+name, func(t *testing.T) {
			t.Parallel()
			for _, r := range []struct {
				method, path string
				body         any
				status       int
			}{
				{http.MethodGet, "/v1/tasks/" + spelled, nil, http.StatusOK},
				{http.MethodPatch, "/v1/tasks/" + spelled, map[string]any{"max_attempts": 4}, http.StatusOK},
				{http.MethodGet, "/v1/tasks/" + spelled + "/runs", nil, http.StatusOK},
				{http.MethodPost, "/v1/tasks/" + spelled + "/runs", nil, http.StatusAccepted},
			} {
				res := b.do(t, r.method, r.path, r.body, admin)
				if res.status != r.status {
					t.Fatalf("%s %s: %d %s", r.method, r.path, res.status, res.raw)
				}
				if got, ok := res.body["id"]; ok && r.method != http.MethodPost && got != id {
					t.Fatalf("%s %s answered id %v, want %s", r.method, r.path, got, id)
				}
			}
		})
	}
	for name, spelled := range spellings(runID) {
		t.Run("run "+name, func(t *testing.T) {
			t.Parallel()
			if res := b.do(t, http.MethodGet, "/v1/runs/"+spelled, nil, admin); res.status != http.StatusOK || res.body["id"] != runID {
				t.Fatalf("get run: %d %s", res.status, res.raw)
			}
		})
	}
}

func TestDisconnectWithAnUpperCaseID(t *testing.T) {
	t.Parallel()
	b := setupCluster(t)
	admin, _ := b.registerAdmin(t, "boss@example.com")
	victim := uuid.NewString()
	b.sockets.lobby[victim] = 2
	res := b.do(t, http.MethodPost, "/v1/admin/users/"+strings.ToUpper(victim)+"/disconnect", nil, admin)
	if res.status != http.StatusOK || res.body["closed"] != float64(2) {
		t.Fatalf("disconnect by upper-case id: %d %s", res.status, res.raw)
	}
}

// TestMalformedIDsAre422Everywhere walks every route of the OpenAPI
// document with an {id}, so a new route is covered without a change here.
func TestMalformedIDsAre422Everywhere(t *testing.T) {
	t.Parallel()
	b := setupEveryRoute(t)
	admin, _ := b.registerAdmin(t, "boss@example.com")
	var routes int
	for path, item := range b.server.API().OpenAPI().Paths {
		if !strings.Contains(path, "{id}") {
			continue
		}
		for method, op := range map[string]any{
			http.MethodGet: item.Get, http.MethodPost: item.Post, http.MethodPatch: item.Patch,
			http.MethodPut: item.Put, http.MethodDelete: item.Delete,
		} {
			if op == (*huma.Operation)(nil) {
				continue
			}
			routes++
			for _, bad := range []string{"not-a-uuid", "urn:uuid:7d4f6a53", "7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a1g", "%7B7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a11", "0", strings.Repeat("a", 300)} {
				res := b.do(t, method, strings.ReplaceAll(path, "{id}", bad), "{}", admin)
				if res.status != http.StatusUnprocessableEntity {
					t.Errorf("%s %s with id %q: %d %s", method, path, bad, res.status, res.raw)
				}
			}
		}
	}
	if routes < 8 {
		t.Fatalf("only %d routes with an {id} in the document", routes)
	}
}
