package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime"
)

// Projects shared by a team, on three replicas of one database: the
// owner, a developer and a viewer of one project, and an outsider.

// callIn is call acting in project (X-Switchboard-Project); "" sends no
// header.
func callIn(t *testing.T, method, url string, body any, token, project string) (int, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body == nil {
		rd = bytes.NewReader(nil)
	} else {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if project != "" {
		req.Header.Set("X-Switchboard-Project", project)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func mustStatus(t *testing.T, want, got int, body map[string]any, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %d %v, want %d", what, got, body, want)
	}
}

// invite makes an invite to project on srv and accepts it as token.
func inviteMember(t *testing.T, srv, at *testServer, owner, project, email, role, token string) {
	t.Helper()
	status, body := call(t, http.MethodPost, srv.URL+"/v1/projects/"+project+"/invites", map[string]string{"email": email, "role": role}, owner)
	mustStatus(t, http.StatusCreated, status, body, "invite "+email)
	status, body = call(t, http.MethodPost, at.URL+"/v1/invites/accept", map[string]string{"token": body["token"].(string)}, token)
	mustStatus(t, http.StatusOK, status, body, "accept "+email)
	if body["role"] != role {
		t.Fatalf("accepted as %v, want %s", body["role"], role)
	}
}

// skipUntil reads frames until one of project's stream with event,
// skipping the others (the run's earlier statuses), for at most a minute.
func (s *sock) skipUntil(t *testing.T, project, event string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case f := <-s.frames:
			if f.Event == event && f.Stream == "project:"+project {
				return
			}
		case <-deadline:
			t.Fatalf("no %s of project %s within a minute", event, project)
		}
	}
}

// runEvents reads the events of run in project's stream until it
// succeeds, for at most a minute, and returns their names sorted by the
// order of statuses (queued, running, succeeded).
func (s *sock) runEvents(t *testing.T, project, run string) []string {
	t.Helper()
	var got []string
	deadline := time.After(time.Minute)
	for !slices.Contains(got, "task.run.succeeded") {
		select {
		case f := <-s.frames:
			var r struct{ ID string }
			if f.Stream != "project:"+project || f.Offset == 0 || json.Unmarshal(f.Payload, &r) != nil || r.ID != run {
				t.Fatalf("%s arrived as %+v, not an event of run %s in project:%s", f.Event, f, run, project)
			}
			got = append(got, f.Event)
		case <-deadline:
			t.Fatalf("run %s did not succeed within a minute: %v", run, got)
		}
	}
	order := map[string]int{"task.run.queued": 0, "task.run.running": 1, "task.run.succeeded": 2}
	slices.SortStableFunc(got, func(a, b string) int { return order[a] - order[b] })
	return got
}

func TestProjectRolesAcrossThreeReplicas(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 3)
	a, b, c := servers[0], servers[1], servers[2]
	owner, _ := registerUserAt(t, a.URL, "owner@example.com")
	dev, devID := registerUserAt(t, b.URL, "dev@example.com")
	viewer, _ := registerUserAt(t, c.URL, "viewer@example.com")
	outsider, _ := registerUserAt(t, a.URL, "outsider@example.com")

	status, body := call(t, http.MethodPost, a.URL+"/v1/projects", map[string]string{"name": "Team"}, owner)
	mustStatus(t, http.StatusCreated, status, body, "create project")
	project := body["id"].(string)
	inviteMember(t, a, b, owner, project, "dev@example.com", "developer", dev)
	inviteMember(t, b, c, owner, project, "viewer@example.com", "viewer", viewer)

	status, body = callIn(t, http.MethodPost, a.URL+"/v1/tasks", map[string]any{
		"name": "team task", "action": map[string]any{"type": "publish", "event": "tick"}}, owner, project)
	mustStatus(t, http.StatusCreated, status, body, "owner creates a task")
	task := body["id"].(string)
	if body["project_id"] != project {
		t.Fatalf("task made in %v, want %s", body["project_id"], project)
	}

	viewerSock := connect(t, c, viewer)
	viewerSockB := connect(t, b, viewer)
	devSock := connect(t, b, dev)

	t.Run("the viewer reads, the developer triggers, every member receives the run", func(t *testing.T) {
		status, body := callIn(t, http.MethodGet, b.URL+"/v1/tasks", nil, viewer, project)
		if status != http.StatusOK || len(body["items"].([]any)) != 1 {
			t.Fatalf("viewer lists tasks: %d %v", status, body)
		}
		status, body = callIn(t, http.MethodGet, c.URL+"/v1/tasks/"+task, nil, viewer, project)
		mustStatus(t, http.StatusOK, status, body, "viewer reads the task")
		for what, req := range map[string][3]string{
			"trigger":    {http.MethodPost, "/v1/tasks/" + task + "/runs", ""},
			"edit":       {http.MethodPatch, "/v1/tasks/" + task, `{"name":"renamed"}`},
			"create key": {http.MethodPost, "/v1/api-keys", `{"name":"k"}`},
		} {
			var payload any
			if req[2] != "" {
				_ = json.Unmarshal([]byte(req[2]), &payload)
			}
			status, body := callIn(t, req[0], c.URL+req[1], payload, viewer, project)
			mustStatus(t, http.StatusForbidden, status, body, "viewer's "+what)
		}
		status, body = callIn(t, http.MethodPost, a.URL+"/v1/tasks/"+task+"/runs", nil, dev, project)
		if status != http.StatusCreated && status != http.StatusAccepted && status != http.StatusOK {
			t.Fatalf("developer's trigger: %d %v", status, body)
		}
		run := body["id"].(string)
		// Each member's sockets receive the run's three statuses once each.
		// (queued is announced by the replica that took the trigger, after
		// its commit; a worker may announce running first.)
		for _, s := range []*sock{viewerSock, viewerSockB, devSock} {
			if got := s.runEvents(t, project, run); !slices.Equal(got, []string{"task.run.queued", "task.run.running", "task.run.succeeded"}) {
				t.Fatalf("the run's events: %v", got)
			}
		}
		status, body = callIn(t, http.MethodGet, b.URL+"/v1/runs/"+run, nil, viewer, project)
		mustStatus(t, http.StatusOK, status, body, "viewer reads the run")
		status, body = callIn(t, http.MethodGet, c.URL+"/v1/history?stream=project:"+project, nil, viewer, "")
		mustStatus(t, http.StatusOK, status, body, "viewer reads the project's history")
	})

	t.Run("the outsider gets 404 on every id", func(t *testing.T) {
		for _, path := range []string{"/v1/tasks/" + task, "/v1/projects/" + project, "/v1/projects/" + project + "/members",
			"/v1/history?stream=project:" + project} {
			for _, p := range []string{project, ""} {
				status, body := callIn(t, http.MethodGet, b.URL+path, nil, outsider, p)
				mustStatus(t, http.StatusNotFound, status, body, "outsider GET "+path+" in "+p)
			}
		}
		status, body := callIn(t, http.MethodPost, c.URL+"/v1/tasks/"+task+"/runs", nil, outsider, "")
		mustStatus(t, http.StatusNotFound, status, body, "outsider's trigger")
	})

	t.Run("a removed developer is refused everywhere and leaves the stream at once", func(t *testing.T) {
		removed := time.Now()
		status, body := call(t, http.MethodDelete, a.URL+"/v1/projects/"+project+"/members/"+devID, nil, owner)
		mustStatus(t, http.StatusNoContent, status, body, "remove the developer")
		for i, s := range servers {
			status, body := callIn(t, http.MethodGet, s.URL+"/v1/tasks/"+task, nil, dev, project)
			mustStatus(t, http.StatusNotFound, status, body, "removed developer on replica "+string(rune('A'+i)))
		}
		select {
		case f := <-devSock.frames:
			var p struct{ Project, Reason string }
			if f.Event != realtime.EventProjectRemoved || json.Unmarshal(f.Payload, &p) != nil || p.Project != project || p.Reason != "removed" {
				t.Fatalf("got %+v, want project.removed", f)
			}
		case <-time.After(time.Minute):
			t.Fatal("no project.removed within a minute of the removal")
		}
		t.Logf("project.removed arrived %s after the removal began", time.Since(removed).Round(time.Millisecond))
		status, body = callIn(t, http.MethodPost, c.URL+"/v1/tasks/"+task+"/runs", nil, owner, project)
		if status >= 300 {
			t.Fatalf("owner's trigger: %d %v", status, body)
		}
		// The run's queued (announced by the replica that took the trigger)
		// and running (by the worker) may reach the stream in either order.
		viewerSockB.skipUntil(t, project, "task.run.queued")
		// A marker to the developer, sent after the viewer's socket on the
		// same replica had the run: anything of the project's stream would
		// have reached the developer's socket before it.
		status, body = call(t, http.MethodPost, b.URL+"/v1/events", map[string]any{"to": devID, "event": "marker"}, owner)
		mustStatus(t, http.StatusAccepted, status, body, "marker")
		if f := devSock.expect(t, "marker"); f.Stream == "project:"+project {
			t.Fatalf("project event reached the removed developer: %+v", f)
		}
	})
}

// TestInviteAcceptedOnce: twenty accepts of one invite at once, spread
// over three replicas, make one membership; the other nineteen are 404.
func TestInviteAcceptedOnce(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 3)
	owner, _ := registerUserAt(t, servers[0].URL, "inviter@example.com")
	guest, _ := registerUserAt(t, servers[1].URL, "guest@example.com")
	status, body := call(t, http.MethodPost, servers[0].URL+"/v1/projects", map[string]string{"name": "Once"}, owner)
	mustStatus(t, http.StatusCreated, status, body, "create project")
	project := body["id"].(string)
	status, body = call(t, http.MethodPost, servers[0].URL+"/v1/projects/"+project+"/invites", map[string]string{"email": "guest@example.com", "role": "viewer"}, owner)
	mustStatus(t, http.StatusCreated, status, body, "invite")
	token := body["token"].(string)
	if !strings.HasPrefix(token, "sbi_") {
		t.Fatalf("token %q", token)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			statuses[i], _ = call(t, http.MethodPost, servers[i%3].URL+"/v1/invites/accept", map[string]string{"token": token}, guest)
		})
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusNotFound:
		default:
			t.Fatalf("an accept answered %d: %v", s, statuses)
		}
	}
	if ok != 1 {
		t.Fatalf("%d accepts succeeded: %v", ok, statuses)
	}
	status, body = call(t, http.MethodGet, servers[2].URL+"/v1/projects/"+project+"/members", nil, owner)
	if status != http.StatusOK || len(body["items"].([]any)) != 2 {
		t.Fatalf("members: %d %v", status, body)
	}
}

// TestRegistrationByInvite: with SWITCHBOARD_REGISTRATION=invite on three
// replicas, a registration goes through only with a valid invite for its
// address (the account joins the project with the invite's role), once;
// a used, expired or revoked invite, another address or none is refused.
func TestRegistrationByInvite(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	var servers []*testServer
	for range 3 {
		cfg := testConfig(t, dbURL)
		cfg.Registration = "invite"
		servers = append(servers, startServer(t, cfg))
	}
	out := runAdminWithInput(t, servers[0], "", "create-user", "owner@example.com")
	password := regexp.MustCompile(`password \(shown only now\): (\S+)`).FindStringSubmatch(out)
	if password == nil {
		t.Fatalf("create-user printed %q", out)
	}
	owner := login(t, servers[0].URL, "owner@example.com", password[1])
	status, body := call(t, http.MethodPost, servers[0].URL+"/v1/projects", map[string]string{"name": "Team"}, owner)
	mustStatus(t, http.StatusCreated, status, body, "create project")
	project := body["id"].(string)
	invite := func(email string) (id, token string) {
		t.Helper()
		status, body := call(t, http.MethodPost, servers[0].URL+"/v1/projects/"+project+"/invites", map[string]string{"email": email, "role": "developer"}, owner)
		mustStatus(t, http.StatusCreated, status, body, "invite "+email)
		return body["id"].(string), body["token"].(string)
	}
	register := func(srv *testServer, email, token string) (int, map[string]any) {
		return call(t, http.MethodPost, srv.URL+"/v1/auth/register", map[string]string{"email": email, "password": "correct horse", "invite": token}, "")
	}
	refused := func(what string, status int, body map[string]any) {
		t.Helper()
		if status != http.StatusForbidden && status != http.StatusUnprocessableEntity && status != http.StatusNotFound {
			t.Fatalf("%s: %d %v, want a refusal", what, status, body)
		}
	}

	_, token := invite("new@example.com")
	for i, srv := range servers {
		status, body := register(srv, "walk-in@example.com", "")
		refused(fmt.Sprintf("replica %d, no invite", i), status, body)
	}
	status, body = register(servers[1], "other@example.com", token)
	refused("another address", status, body)
	status, body = register(servers[1], "new@example.com", token)
	mustStatus(t, http.StatusCreated, status, body, "register with the invite")
	status, body = register(servers[2], "new2@example.com", token)
	refused("the invite again", status, body)

	newcomer := login(t, servers[2].URL, "new@example.com", "correct horse")
	status, body = call(t, http.MethodGet, servers[2].URL+"/v1/projects/"+project+"/members", nil, newcomer)
	mustStatus(t, http.StatusOK, status, body, "the newcomer lists the members")
	role := ""
	for _, m := range body["items"].([]any) {
		if m := m.(map[string]any); m["email"] == "new@example.com" {
			role, _ = m["role"].(string)
		}
	}
	if role != "developer" {
		t.Fatalf("the newcomer's role is %q in %v, want developer", role, body)
	}

	_, expired := invite("late@example.com")
	if _, err := servers[0].pool.Exec(t.Context(), `UPDATE project_invites SET expires_at = now() - interval '1 second' WHERE email = 'late@example.com'`); err != nil {
		t.Fatal(err)
	}
	status, body = register(servers[0], "late@example.com", expired)
	refused("an expired invite", status, body)

	revokedID, revoked := invite("gone@example.com")
	status, body = call(t, http.MethodDelete, servers[1].URL+"/v1/projects/"+project+"/invites/"+revokedID, nil, owner)
	if status != http.StatusNoContent {
		t.Fatalf("revoke: %d %v", status, body)
	}
	status, body = register(servers[2], "gone@example.com", revoked)
	refused("a revoked invite", status, body)
}
