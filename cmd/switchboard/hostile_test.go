package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// The hostile-input pass: every route of the served OpenAPI document (read
// at run time, so a new route is covered without a change here) gets
// hostile ids, bodies, property values, cron strings, time zones, query
// values, tokens and headers, and a socket gets hostile frames, against the
// real server on a real database. No answer may be a 5xx, the server must
// stay up, and a refused request (4xx) must change no stored state.

// hostileIDs replace every {id} of a path.
var hostileIDs = []string{
	"not-a-uuid", "0", "-1", "urn:uuid:", "urn:uuid:7d4f6a53", "{7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a11",
	"7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a1g", "7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a11-", "%00", "%2e%2e", "%20",
	"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", strings.Repeat("a", 5000),
	"é", "%F0%9F%98%80", "%FF", "null", "%C0%AF",
}

// hostileValues are JSON values put in place of each property of a body.
var hostileValues = []string{
	`null`, `""`, `" "`, `"\u0000"`, `"a\u0000b"`, `"\ud800"`, `"\udfff"`, `"x\ud800y"`, `"\ud83d\ude00"`,
	`"` + strings.Repeat("x", 70000) + `"`, `0`, `-1`, `1e308`, `-1e308`, `1e999`, `9223372036854775808`, `0.5`,
	`true`, `[]`, `[null]`, `{}`, `{"a":{"b":{}}}`, strings.Repeat("[", 3000) + strings.Repeat("]", 3000),
	`"urn:uuid:7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a11"`, `"{7D4F6A53-4F65-4B8E-9A57-6B3F1C1B1A11}"`,
	`"../../etc/passwd"`, `"<script>alert(1)</script>"`, `"%00"`, `"\u202e\u0007\u001b[31m"`, `"\t\r\n"`,
}

// hostileSchedules and hostileZones go into every "schedule" and "timezone".
var hostileSchedules = []string{
	"", " ", "* * * * * * *", "* * * *", "60 * * * *", "*/0 * * * *", "0 0 31 2 *", "0 0 30 2 *", "@every 0s",
	"@every -1s", "@every 1ns", "@every 999999999999h", "@every 1s", "@every", "@reboot", "@midnight", "@ yearly",
	"CRON_TZ=Europe/Paris * * * * *", "TZ=Nowhere/Land * * * * *", "1-99999999999 * * * *",
	"*/9223372036854775807 * * * *", "١ * * * *", "* * * * MON-SUN-FRI", "59-0 * * * *", "* * * * 8",
	"0 0 0 * *", "? * * * *", strings.Repeat("* ", 5000), "*\x00 * * * *",
}

var hostileZones = []string{
	"", "Local", "local", "../../etc/passwd", "/etc/localtime", "UTC\x00", " UTC ", "Europe/Atlantis",
	"America/New_York/", "+01:00", "Etc/GMT+14", "Etc/GMT+99", strings.Repeat("A/", 2000), "é",
}

// hostileActions replace a task's action.
var hostileActions = []string{
	`{"type":"webhook","url":"http://[::1]:80/"}`, `{"type":"webhook","url":"http://169.254.169.254/latest"}`,
	`{"type":"webhook","url":"http://100.100.100.200/"}`, `{"type":"webhook","url":"javascript:alert(1)"}`,
	`{"type":"webhook","url":"http://user:pass@example.com/"}`, `{"type":"webhook","url":"http://example.com/\u0000"}`,
	`{"type":"webhook","url":"https://example.com/` + strings.Repeat("a", 5000) + `"}`,
	`{"type":"webhook","url":"https://example.com/","headers":{"X\u00e9":"v"}}`,
	`{"type":"webhook","url":"https://example.com/","headers":{"X-A":"\r\nInjected: 1"}}`,
	`{"type":"webhook","url":"https://example.com/","headers":{"":"v"}}`,
	`{"type":"webhook","url":"https://example.com/","headers":{"X-A":"\u0001"}}`,
	`{"type":"webhook","url":"https://example.com/","body":"\ud800"}`,
	`{"type":"webhook","url":"https://example.com/","method":"TRACE"}`,
	`{"type":"publish","event":"task.run.succeeded"}`, `{"type":"publish","event":"e","room":" "}`,
	`{"type":"publish","event":"e","room":"\u0001"}`, `{"type":"publish","event":"e","room":"` + strings.Repeat("r", 300) + `"}`,
	`{"type":"publish","event":"e","payload":{"k":"\u0000"}}`, `{"type":"publish","event":"","payload":1}`,
	`{"type":"email"}`, `{"type":"publish","event":"e","url":"https://example.com/"}`,
}

// hostileBodies replace a whole body.
var hostileBodies = []string{
	"", "null", "[]", "{", "}", `{"a":`, "\x00", `"\u0000"`, "\xff\xfe", `{"a":"\xff"}`, "1", `"s"`, "{}",
	strings.Repeat("[", 100000), strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000),
	`{"a":1,"a":2}`, `{"__proto__":{"x":1}}`, string(manyKeys(5000)),
}

func manyKeys(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":{"nested":[%d]}`, i, i)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// hostileQueries are the values of every query parameter.
var hostileQueries = []string{
	"", "-1", "0", "101", "1e99", "99999999999999999999", "abc", "\x00", "%00", strings.Repeat("q", 10000),
	"urn:uuid:7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a11", "é", "\xed\xa0\x80",
}

type hostile struct {
	t      *testing.T
	srv    *testServer
	pool   *pgxpool.Pool
	user   string // tokens
	admin  string
	userID string
	taskID string
	runID  string
	// projectID is the fuzzing user's personal project.
	projectID string
	sent      int // requests made
}

type operation struct {
	method, path string
	props        []string
	query        []string
	hasBody      bool
}

func TestHostileInputs(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	cfg := testConfig(t, dbURL)
	cfg.Roles = []string{config.RoleWeb} // no claim loop: state changes only by request
	// Oversized bodies must meet the size limit (413), not the read
	// timeout a loaded machine may reach first while reading 8 MiB.
	cfg.BodyReadTimeout = 2 * time.Minute
	cfg.Quotas = hostileQuotas
	srv := startServer(t, cfg)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := &hostile{t: t, srv: srv, pool: pool}
	h.user, h.userID = registerUser(t, srv, "hostile@example.com")
	h.admin, _ = registerUser(t, srv, "hostile-admin@example.com")
	registerUser(t, srv, "hostile-sessions@example.com")
	runAdmin(t, srv, "grant", "hostile-admin@example.com")
	h.taskID = createTask(t, srv.URL, h.user, map[string]any{"name": "kept", "schedule": "0 0 1 1 *", "action": map[string]any{"type": "publish", "event": "e"}})
	status, run := call(t, http.MethodPost, srv.URL+"/v1/tasks/"+h.taskID+"/runs", nil, h.user)
	if status != http.StatusAccepted {
		t.Fatalf("trigger: %d %v", status, run)
	}
	h.runID = run["id"].(string)
	status, projects := call(t, http.MethodGet, srv.URL+"/v1/projects", nil, h.user)
	if status != http.StatusOK {
		t.Fatalf("projects: %d %v", status, projects)
	}
	h.projectID = projects["items"].([]any)[0].(map[string]any)["id"].(string)
	makeRoom(t, srv, h.user, hostileRoom, "members")
	ops := h.operations()

	// Subtests in sequence: each compares the state before and after its
	// own requests.
	t.Run("every route of the OpenAPI document", func(t *testing.T) {
		h.t = t
		for _, op := range ops {
			h.fuzzOperation(op)
		}
	})
	t.Run("routes outside the document", func(t *testing.T) { h.t = t; h.fuzzRaw() })
	t.Run("batch trigger bounds", func(t *testing.T) { h.t = t; h.fuzzBatch() })
	t.Run("quota refusals", func(t *testing.T) { h.t = t; h.fuzzQuotas() })
	t.Run("WebSocket frames", func(t *testing.T) { h.t = t; h.fuzzFrames() })
	h.t = t
	if status, body := call(t, http.MethodGet, srv.URL+"/healthz/ready", nil, ""); status != http.StatusOK {
		t.Fatalf("the server is not ready after the pass: %d %v", status, body)
	}
	t.Logf("%d requests over %d operations", h.sent, len(ops))
}

// operations reads the served OpenAPI document.
func (h *hostile) operations() []operation {
	res, err := http.Get(h.srv.URL + "/openapi.json")
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage
		Components struct {
			Schemas map[string]struct{ Properties map[string]any }
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		h.t.Fatal(err)
	}
	var ops []operation
	for path, methods := range doc.Paths {
		for method, raw := range methods {
			var op struct {
				Parameters  []struct{ Name, In string }
				RequestBody struct {
					Content map[string]struct {
						Schema struct {
							Ref string `json:"$ref"`
						}
					}
				}
			}
			if json.Unmarshal(raw, &op) != nil {
				continue // not an operation (a path's shared parameters)
			}
			o := operation{method: strings.ToUpper(method), path: path}
			for _, p := range op.Parameters {
				if p.In == "query" {
					o.query = append(o.query, p.Name)
				}
			}
			if c, ok := op.RequestBody.Content["application/json"]; ok {
				o.hasBody = true
				for name := range doc.Components.Schemas[strings.TrimPrefix(c.Schema.Ref, "#/components/schemas/")].Properties {
					o.props = append(o.props, name)
				}
				slices.Sort(o.props)
			}
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.method+a.path, b.method+b.path) })
	// Deletes last: they may remove the task the others use.
	slices.SortStableFunc(ops, func(a, b operation) int {
		return boolInt(a.method == http.MethodDelete) - boolInt(b.method == http.MethodDelete)
	})
	if len(ops) < 20 {
		h.t.Fatalf("only %d operations in the document", len(ops))
	}
	return ops
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// validID is the id a path gets when its other parts are fuzzed: one of
// the caller's own resources, so that validation past the id is reached.
func (h *hostile) validID(path string) string {
	switch {
	case strings.HasPrefix(path, "/v1/tasks/"):
		return h.taskID
	case strings.HasPrefix(path, "/v1/runs/"):
		return h.runID
	case strings.HasPrefix(path, "/v1/users/") && !strings.HasSuffix(path, "/rpc"):
		return h.userID
	case strings.HasPrefix(path, "/v1/projects/"):
		return h.projectID // its personal project: the owner reaches validation
	}
	// Nodes and other users: none that exists. (An RPC to another user is
	// refused after validation; one to oneself waits a second to learn
	// that no socket is connected.)
	return uuid.NewString()
}

// baseBody is a valid body for op, or {}.
func (h *hostile) baseBody(op operation) map[string]json.RawMessage {
	raw := map[string]string{
		"/v1/tasks":                           `{"name":"fuzzed","schedule":"0 0 1 1 *","action":{"type":"publish","event":"e"}}`,
		"/v1/events":                          `{"to":"` + h.userID + `","event":"fuzz","payload":1}`,
		"/v1/users/{id}/rpc":                  `{"method":"m","timeout_ms":2000}`,
		"/v1/auth/register":                   `{"email":"fuzz-` + uuid.NewString()[:8] + `@example.com","password":"correct horse"}`,
		"/v1/auth/login":                      `{"email":"hostile@example.com","password":"wrong password"}`,
		"/v1/rooms":                           `{"name":"fuzz-` + uuid.NewString()[:8] + `","visibility":"members"}`,
		"/v1/projects/{id}/invites":           `{"email":"fuzz-invite@example.com","role":"viewer"}`,
		"/v1/projects/{id}/members/{user_id}": `{"role":"viewer"}`,
		"/v1/invites/accept":                  `{"token":"sbi_unknown"}`,
		"/v1/tasks/{id}/runs/batch":           `{"items":[{"payload":1},{"idempotency_key":"k"}]}`,
	}[op.path]
	if op.method == http.MethodPatch {
		raw = `{}`
	}
	out := map[string]json.RawMessage{}
	if raw != "" {
		_ = json.Unmarshal([]byte(raw), &out)
	}
	return out
}

// hostileRoom is the fuzzing user's own room: room routes get past the
// owner check to their validation.
const hostileRoom = "fuzz-room"

func (h *hostile) fuzzOperation(op operation) {
	tokenOf := func() string { return h.user }
	if strings.HasPrefix(op.path, "/v1/admin/") || op.path == "/v1/cluster/status" {
		tokenOf = func() string { return h.admin }
	}
	admin := h.admin
	if endsSessions(op.path) {
		// Each request a fresh token of an account of its own: a logout
		// that succeeds must not sign out the pass's other requests.
		tokenOf = h.sessionToken
		admin = h.sessionToken()
	}
	path := strings.ReplaceAll(op.path, "{id}", h.validID(op.path))
	path = strings.NewReplacer("{name}", hostileRoom, "{user_id}", h.userID, "{invite_id}", uuid.NewString()).Replace(path)
	if strings.Contains(op.path, "{name}") {
		for _, name := range []string{"%20lobby", "a%01b", "%ff", "%00", strings.Repeat("r", 129), "other-room", "%7Bname%7D"} {
			h.send(op.method, strings.Replace(path, hostileRoom, name, 1), h.encode(h.baseBody(op)), tokenOf(), nil)
		}
	}
	if strings.Contains(op.path, "{user_id}") {
		for _, id := range append([]string{uuid.NewString()}, hostileIDs...) {
			h.send(op.method, strings.Replace(path, h.userID, id, 1), h.encode(h.baseBody(op)), tokenOf(), nil)
		}
	}
	if strings.Contains(op.path, "{id}") {
		valid := h.validID(op.path)
		spelled := []string{strings.ToUpper(valid), "urn:uuid:" + valid, "{" + valid + "}", strings.ReplaceAll(valid, "-", "")}
		for _, id := range append(spelled, hostileIDs...) {
			h.send(op.method, strings.ReplaceAll(op.path, "{id}", id), h.encode(h.baseBody(op)), tokenOf(), nil)
		}
	}
	for _, tok := range []string{"", "garbage", strings.Repeat("x", 9000), forgedToken(h.userID), admin} {
		h.send(op.method, path, h.encode(h.baseBody(op)), tok, nil)
	}
	for _, q := range op.query {
		for _, v := range hostileQueries {
			h.send(op.method, path+"?"+url.Values{q: {v}}.Encode(), h.encode(h.baseBody(op)), tokenOf(), nil)
		}
	}
	h.send(op.method, path+"?unknown=1&limit=1&limit=2", h.encode(h.baseBody(op)), tokenOf(), nil)
	if !op.hasBody {
		h.send(op.method, path, []byte(`{"unexpected":"body"}`), tokenOf(), nil)
		return
	}
	for _, b := range hostileBodies {
		h.send(op.method, path, []byte(b), tokenOf(), nil)
	}
	for _, ct := range []string{"text/plain", "application/cbor", "application/json; charset=utf-16", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "application/merge-patch+json"} {
		h.send(op.method, path, h.encode(h.baseBody(op)), tokenOf(), http.Header{"Content-Type": {ct}})
	}
	for _, prop := range op.props {
		values := slices.Clone(hostileValues)
		switch prop {
		case "schedule":
			values = append(values, quoteAll(hostileSchedules)...)
		case "timezone":
			values = append(values, quoteAll(hostileZones)...)
		case "action":
			values = append(values, hostileActions...)
		}
		for _, v := range values {
			body := h.baseBody(op)
			body[prop] = json.RawMessage(v)
			h.send(op.method, path, h.encode(body), tokenOf(), nil)
		}
	}
}

// endsSessions reports whether a route ends the caller's sessions when it
// succeeds.
func endsSessions(path string) bool {
	return path == "/v1/auth/logout" || path == "/v1/me/sessions/revoke" || path == "/v1/me/password"
}

// sessionToken logs the account of the session-ending routes in again.
func (h *hostile) sessionToken() string {
	status, body := call(h.t, http.MethodPost, h.srv.URL+"/v1/auth/login", map[string]string{"email": "hostile-sessions@example.com", "password": "correct horse"}, "")
	if status != http.StatusOK {
		h.t.Fatalf("log the session account in: %d %v", status, body)
	}
	return body["token"].(string)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		b, _ := json.Marshal(s)
		out[i] = string(b)
	}
	return out
}

// encode writes body as JSON without checking its raw values: invalid
// JSON values reach the server as they are.
func (h *hostile) encode(body map[string]json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range body {
			if !yield(k) {
				return
			}
		}
	})
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(body[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// forgedToken is a JWT for userID with alg none.
func forgedToken(userID string) string {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	return enc(`{"alg":"none","typ":"JWT"}`) + "." + enc(`{"sub":"`+userID+`","role":"admin","iss":"switchboard","exp":9999999999}`) + "."
}

// fuzzRaw covers what the document does not describe: unknown paths and
// methods, the raw routes, the internal routes and oversized headers.
func (h *hostile) fuzzRaw() {
	for _, r := range []struct{ method, path string }{
		{http.MethodPut, "/v1/tasks"}, {http.MethodGet, "/v1/nope"}, {http.MethodGet, "/v1/tasks/../../etc/passwd"},
		{http.MethodGet, "//v1//tasks"}, {http.MethodGet, "/v1/%00"}, {http.MethodGet, "/v1/ws"}, {http.MethodGet, "/v1/ws?ticket="},
		{http.MethodGet, "/v1/ws?ticket=" + strings.Repeat("t", 5000)}, {http.MethodGet, "/v1/ws?ticket=%00"},
		{http.MethodGet, "/riverui/"}, {http.MethodGet, "/riverui/api/jobs?state=%00"}, {http.MethodGet, "/metrics?x=%00"},
		{http.MethodPost, "/internal/v1/nodes/x/drain"}, {http.MethodGet, "/internal/v1/nodes/" + uuid.NewString() + "/status"},
		{http.MethodPost, "/internal/v1/nodes/" + h.srv.nodeID + "/users/%00/disconnect"}, {http.MethodGet, "/internal/v1/../v1/me"},
	} {
		for _, tok := range []string{"", h.user, h.admin} {
			h.send(r.method, r.path, nil, tok, nil)
		}
	}
	for _, hd := range []http.Header{
		{"X-Forwarded-For": {"garbage, , 999.1.1.1"}}, {"X-Request-Id": {strings.Repeat("r", 300)}},
		{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("a:b"))}}, {"Authorization": {"Bearer"}}, {"Authorization": {"bearer  " + h.user + " x"}},
		{"Accept": {"application/cbor"}}, {"Accept": {"text/html"}}, {"Accept": {"*/*;q=0"}}, {"Accept-Encoding": {"gzip;q=2"}},
		{"X-Huge": {strings.Repeat("h", 2<<20)}}, {"Origin": {"null"}},
		{cluster.HeaderTimestamp: {"1"}, cluster.HeaderSignature: {"v1=" + strings.Repeat("0", 64)}},
	} {
		h.send(http.MethodGet, "/v1/me", nil, "", hd)
		h.send(http.MethodPost, "/v1/tasks", []byte(`{"name":1}`), "", hd)
	}
}

// send makes one request and checks the answer and the stored state; it
// returns the answer's status.
func (h *hostile) send(method, path string, body []byte, token string, header http.Header) int {
	h.t.Helper()
	h.sent++
	before := h.snapshot()
	req, err := http.NewRequest(method, h.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		req, err = http.NewRequest(method, h.srv.URL+url.PathEscape(path), bytes.NewReader(body))
		if err != nil {
			h.t.Fatalf("%s %q: %v", method, path, err)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, shorten(path), err)
	}
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	if res.StatusCode >= 500 {
		h.t.Errorf("%s %s (%s): %d %s", method, shorten(path), shorten(string(body)), res.StatusCode, shorten(string(answer)))
	}
	// River UI answers its own API's errors in its own JSON.
	if ct := res.Header.Get("Content-Type"); res.StatusCode >= 400 && res.StatusCode != http.StatusRequestHeaderFieldsTooLarge &&
		ct != "application/problem+json" && !strings.HasPrefix(path, "/riverui/") {
		h.t.Errorf("%s %s (%s): %d answered as %q, want application/problem+json: %s", method, shorten(path), shorten(string(body)), res.StatusCode, ct, shorten(string(answer)))
	}
	if res.StatusCode >= 400 && res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		if after := h.snapshot(); after != before {
			h.t.Errorf("%s %s (%s) was refused with %d but changed the stored state", method, shorten(path), shorten(string(body)), res.StatusCode)
		}
	}
	return res.StatusCode
}

// snapshot is a digest of every table a request may write.
func (h *hostile) snapshot() string {
	var s string
	err := h.pool.QueryRow(context.Background(), `
		SELECT concat_ws('|',
			(SELECT md5(coalesce(string_agg(u::text, ',' ORDER BY id), '')) FROM users u),
			(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM tasks t),
			(SELECT md5(coalesce(string_agg(r::text, ',' ORDER BY id), '')) FROM task_runs r),
			(SELECT count(*) FROM river_job),
			(SELECT count(*) FROM ws_tickets),
			(SELECT md5(coalesce(string_agg(r::text, ',' ORDER BY name), '')) FROM rooms r),
			(SELECT md5(coalesce(string_agg(m::text, ',' ORDER BY room, user_id), '')) FROM room_members m),
			(SELECT md5(coalesce(string_agg(n.id::text || n.draining::text, ',' ORDER BY id), '')) FROM cluster_nodes n),
			(SELECT md5(coalesce(string_agg(r::text, ',' ORDER BY jti), '')) FROM revoked_tokens r),
			(SELECT md5(coalesce(string_agg(p::text, ',' ORDER BY token_hash), '')) FROM password_resets p),
			(SELECT md5(coalesce(string_agg(p::text, ',' ORDER BY id), '')) FROM projects p),
			(SELECT md5(coalesce(string_agg(m::text, ',' ORDER BY project_id, user_id), '')) FROM project_members m),
			(SELECT md5(coalesce(string_agg(i::text, ',' ORDER BY id), '')) FROM project_invites i))`).Scan(&s)
	if err != nil {
		h.t.Fatalf("snapshot: %v", err)
	}
	return s
}

// fuzzFrames sends hostile frames on one socket; a frame is answered with
// an error event or a documented close, and the socket (or a new one, after
// a close) still delivers.
func (h *hostile) fuzzFrames() {
	t := h.t
	token, id := registerUser(t, h.srv, "hostile-socket@example.com")
	frames := []string{
		"", "null", "[]", "{", "\x00", `"s"`, "1", `{"event":1}`, `{"event":""}`, `{"event":"` + strings.Repeat("e", 5000) + `"}`,
		`{"event":"dm"}`, `{"event":"dm","to":"not-a-uuid"}`, `{"event":"dm","to":"URN:UUID:` + strings.ToUpper(id) + `","payload":1}`,
		`{"event":"dm","to":"` + id + `","payload":"\u0000"}`, `{"event":"dm","to":"` + id + `","payload":"\ud800"}`,
		`{"event":"dm","to":"` + id + `","payload":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
		`{"event":"dm","to":"` + id + `","payload":` + string(manyKeys(3000)) + `}`,
		`{"event":"room.join"}`, `{"event":"room.join","room":""}`, `{"event":"room.join","room":" "}`, `{"event":"room.join","room":"\u0000"}`,
		`{"event":"room.join","room":"` + strings.Repeat("r", 1000) + `"}`, `{"event":"room.join","room":"\ud800"}`,
		`{"event":"room.message","room":"never-joined","payload":1}`, `{"event":"room.leave","room":"never-joined"}`,
		`{"event":"typing","to":"{` + id + `}"}`, `{"event":"typing","room":"\u0001"}`, `{"event":"rpc.result","id":"nope","payload":1}`,
		`{"event":"rpc.result","payload":1}`, `{"event":"task.run.succeeded","to":"` + id + `"}`, `{"event":"server.draining"}`,
		`{"event":"dm","to":"` + id + `","from":"forged","ts":"forged","payload":1}`, `{"event":"dm","to":"` + id + `","payload":1,"payload":2}`,
		`{"event":"dm","to":"` + id + `","payload":"` + strings.Repeat("p", 70<<10) + `"}`,
	}
	s := connect(t, h.srv, token)
	for _, f := range frames {
		if err := s.conn.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			t.Fatalf("write %s: %v", shorten(f), err)
		}
	}
	for _, raw := range [][]byte{{0xff, 0xfe}, []byte(`{"event":"dm","to":"` + id + `","payload":"` + "\xff" + `"}`)} {
		_ = s.conn.WriteMessage(websocket.TextMessage, raw)
	}
	_ = s.conn.WriteMessage(websocket.BinaryMessage, []byte{0, 1, 2})
	h.requireDelivers(s, id)
	// Over the hard frame limit: a documented close, then a new socket works.
	_ = s.conn.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), 300<<10))
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a frame over the hard limit did not close the socket")
	}
	var ce *websocket.CloseError
	if !errors.As(s.err, &ce) || !slices.Contains([]int{websocket.CloseMessageTooBig, websocket.CloseAbnormalClosure}, ce.Code) {
		t.Fatalf("closed with %v, want 1009 (1006 until frames close cleanly)", s.err)
	}
	h.requireDelivers(connect(t, h.srv, token), id)
}

// requireDelivers sends a DM to self on s and waits for it, skipping the
// frames the hostile ones produced (errors, joins, typing).
func (h *hostile) requireDelivers(s *sock, self string) {
	h.t.Helper()
	marker := "alive-" + uuid.NewString()[:8]
	if err := s.conn.WriteJSON(map[string]any{"event": "dm", "to": self, "payload": marker}); err != nil {
		h.t.Fatalf("send marker: %v", err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case f := <-s.frames:
			if f.Event == "dm" && string(f.Payload) == `"`+marker+`"` {
				return
			}
		case <-s.done:
			h.t.Fatalf("the socket closed: %v", s.err)
		case <-deadline:
			h.t.Fatal("the socket no longer delivers after hostile frames")
		}
	}
}

func shorten(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%q…(%d bytes)", s[:120], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// fuzzBatch sends batch triggers over their bounds: too many items, a
// body over its limit, malformed items. Each is refused whole.
// hostileQuotas are the pass's run quotas, small enough for one request
// to pass (the others: the defaults).
var hostileQuotas = config.Quotas{QueuedRuns: 20, BackfillTicks: 5}

// fuzzQuotas: a batch or backfill bigger than what its quota leaves is
// refused whole with 429 and changes nothing (send checks the state).
func (h *hostile) fuzzQuotas() {
	task := createTask(h.t, h.srv.URL, h.user, map[string]any{
		"name": "hourly", "schedule": "0 * * * *", "overlap": "allow", "action": map[string]any{"type": "publish", "event": "e"},
	})
	from := time.Now().UTC().Truncate(time.Hour).Add(-24 * time.Hour)
	backfill := fmt.Sprintf(`{"from":%q,"to":%q}`, from.Format(time.RFC3339), from.Add(10*time.Hour).Format(time.RFC3339))
	batch := `{"items":[` + strings.TrimSuffix(strings.Repeat(`{},`, hostileQuotas.QueuedRuns+1), ",") + `]}`
	for path, body := range map[string]string{"/v1/tasks/" + task + "/backfill": backfill, "/v1/tasks/" + task + "/runs/batch": batch} {
		if got := h.send(http.MethodPost, path, []byte(body), h.user, nil); got != http.StatusTooManyRequests {
			h.t.Errorf("POST %s past its quota: %d, want 429", path, got)
		}
	}
}

func (h *hostile) fuzzBatch() {
	path := "/v1/tasks/" + h.taskID + "/runs/batch"
	items := func(n int, item string) []byte {
		return []byte(`{"items":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`)
	}
	for _, c := range []struct {
		body []byte
		want int
	}{
		{items(1001, `{}`), http.StatusUnprocessableEntity},
		{items(0, `{}`), http.StatusUnprocessableEntity},
		{items(200, `{"payload":"`+strings.Repeat("p", 50000)+`"}`), http.StatusRequestEntityTooLarge},
		{items(3, `{"run_at":"tomorrow"}`), http.StatusUnprocessableEntity},
		{items(3, `{"idempotency_key":"`+strings.Repeat("k", 256)+`"}`), http.StatusUnprocessableEntity},
		{items(3, `{"idempotency_key":7}`), http.StatusUnprocessableEntity},
		{items(2, `{"unknown":1}`), http.StatusUnprocessableEntity},
		{items(2, `[]`), http.StatusUnprocessableEntity},
		{[]byte(`{"items":[{}],"extra":1}`), http.StatusUnprocessableEntity},
	} {
		if got := h.send(http.MethodPost, path, c.body, h.user, nil); got != c.want {
			h.t.Errorf("batch %s: %d, want %d", shorten(string(c.body)), got, c.want)
		}
	}
}
