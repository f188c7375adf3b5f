package web

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/humatest"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// post sends a JSON body (sent as it is) with a token and an
// Idempotency-Key ("" for none).
func (b *testBundle) post(t *testing.T, path, body, token, key string) response {
	t.Helper()
	args := []any{strings.NewReader(body), "Content-Type: application/json", "Authorization: Bearer " + token}
	if key != "" {
		args = append(args, "Idempotency-Key: "+key)
	}
	return recorded(b.api(t).Do(http.MethodPost, path, args...))
}

const taskBody = `{"name":"nightly","schedule":"@daily","action":{"type":"publish","event":"tick"}}`

func (b *testBundle) taskCount(t *testing.T, userID string) int {
	t.Helper()
	var n int
	if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tasks WHERE owner_id = $1`, userID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("the same key replays the first answer", func(t *testing.T) {
		t.Parallel()
		token, id := b.register(t, "idem-replay@example.com")
		key := uuid.NewString()
		first := b.post(t, "/v1/tasks", taskBody, token, key)
		second := b.post(t, "/v1/tasks", taskBody, token, `"`+key+`"`) // the quoted form is the same key
		if first.status != http.StatusCreated || second.status != first.status || !bytes.Equal(first.raw, second.raw) {
			t.Fatalf("answers differ: %d %s / %d %s", first.status, first.raw, second.status, second.raw)
		}
		if first.header.Get(replayedHeader) != "" || second.header.Get(replayedHeader) != "true" || second.header.Get("Content-Type") != first.header.Get("Content-Type") {
			t.Fatalf("headers: %v / %v", first.header, second.header)
		}
		if n := b.taskCount(t, id); n != 1 {
			t.Fatalf("%d tasks, want 1", n)
		}
		// Without a key, or with another one, a POST creates again.
		if res := b.post(t, "/v1/tasks", taskBody, token, ""); res.status != http.StatusCreated {
			t.Fatalf("no key: %d", res.status)
		}
		if res := b.post(t, "/v1/tasks", taskBody, token, uuid.NewString()); res.status != http.StatusCreated || b.taskCount(t, id) != 3 {
			t.Fatalf("new key: %d", res.status)
		}
	})

	t.Run("a different request under the key is a 422", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "idem-diff@example.com")
		key := uuid.NewString()
		if res := b.post(t, "/v1/tasks", taskBody, token, key); res.status != http.StatusCreated {
			t.Fatalf("first: %d %s", res.status, res.raw)
		}
		requireProblem(t, b.post(t, "/v1/tasks", strings.Replace(taskBody, "nightly", "weekly", 1), token, key), http.StatusUnprocessableEntity)
		requireProblem(t, b.post(t, "/v1/api-keys", `{"name":"x"}`, token, key), http.StatusUnprocessableEntity)
	})

	t.Run("keys are per account", func(t *testing.T) {
		t.Parallel()
		alice, aliceID := b.register(t, "idem-alice@example.com")
		bob, bobID := b.register(t, "idem-bob@example.com")
		key := uuid.NewString()
		a := b.post(t, "/v1/tasks", taskBody, alice, key)
		c := b.post(t, "/v1/tasks", taskBody, bob, key)
		if a.status != http.StatusCreated || c.status != http.StatusCreated || a.body["id"] == c.body["id"] || b.taskCount(t, aliceID) != 1 || b.taskCount(t, bobID) != 1 {
			t.Fatalf("alice %d %s, bob %d %s", a.status, a.raw, c.status, c.raw)
		}
	})

	t.Run("a failed request releases the key", func(t *testing.T) {
		t.Parallel()
		token, id := b.register(t, "idem-fail@example.com")
		key := uuid.NewString()
		requireProblem(t, b.post(t, "/v1/tasks", `{"name":"x","schedule":"nonsense","action":{"type":"publish","event":"tick"}}`, token, key), http.StatusUnprocessableEntity)
		if res := b.post(t, "/v1/tasks", taskBody, token, key); res.status != http.StatusCreated || res.header.Get(replayedHeader) != "" || b.taskCount(t, id) != 1 {
			t.Fatalf("after a failure: %d %s", res.status, res.raw)
		}
	})

	t.Run("concurrent requests: one runs, all get its answer", func(t *testing.T) {
		t.Parallel()
		token, id := b.register(t, "idem-race@example.com")
		key := uuid.NewString()
		answers := make([]response, 8)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = b.post(t, "/v1/tasks", taskBody, token, key) })
		}
		wg.Wait()
		for _, a := range answers {
			if a.status != http.StatusCreated || !bytes.Equal(a.raw, answers[0].raw) {
				t.Fatalf("answers differ: %d %s / %s", a.status, a.raw, answers[0].raw)
			}
		}
		if n := b.taskCount(t, id); n != 1 {
			t.Fatalf("%d tasks, want 1", n)
		}
	})

	t.Run("in flight: 409 after a short wait; abandoned: taken over", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.server.idemWait = 200 * time.Millisecond
		token, id := b.register(t, "idem-flight@example.com")
		key := uuid.NewString()
		fp := inFlight(t, b, id, key, "/v1/tasks", taskBody, time.Minute)
		res := b.post(t, "/v1/tasks", taskBody, token, key)
		requireProblem(t, res, http.StatusConflict)
		if res.header.Get("Retry-After") != "1" || b.taskCount(t, id) != 0 {
			t.Fatalf("in flight: %v", res.header)
		}
		requireProblem(t, b.post(t, "/v1/tasks", `{}`, token, key), http.StatusUnprocessableEntity)
		if _, err := b.server.opts.Pool.Exec(context.Background(), `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE fingerprint = $1`, fp); err != nil {
			t.Fatal(err)
		}
		if res := b.post(t, "/v1/tasks", taskBody, token, key); res.status != http.StatusCreated || b.taskCount(t, id) != 1 {
			t.Fatalf("abandoned: %d %s", res.status, res.raw)
		}
		b.post(t, "/v1/tasks", taskBody, token, key)
		b.post(t, "/v1/tasks", `{"name":""}`, token, uuid.NewString())
		metrics := string(b.do(t, http.MethodGet, "/metrics", nil, "").raw)
		for _, want := range []string{"in_flight", "mismatch", "executed", "replayed", "released"} {
			if !strings.Contains(metrics, `switchboard_idempotency_requests_total{outcome="`+want+`"} 1`) {
				t.Errorf("metric %s not 1:\n%s", want, metrics)
			}
		}
	})

	t.Run("a body over the limit is a 413, and keeps nothing", func(t *testing.T) {
		t.Parallel()
		token, id := b.register(t, "idem-big@example.com")
		key := uuid.NewString()
		big := `{"name":"` + strings.Repeat("n", 1<<20) + `"}`
		if res := b.post(t, "/v1/tasks", big, token, key); res.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("big body: %d %s", res.status, res.raw)
		}
		if res := b.post(t, "/v1/tasks", taskBody, token, key); res.status != http.StatusCreated || b.taskCount(t, id) != 1 {
			t.Fatalf("after: %d %s", res.status, res.raw)
		}
	})

	t.Run("a malformed key is a 400", func(t *testing.T) {
		t.Parallel()
		token, id := b.register(t, "idem-bad@example.com")
		for _, k := range []string{strings.Repeat("k", 256), "two words", "caf\u00e9", `""`} {
			requireProblem(t, b.post(t, "/v1/tasks", taskBody, token, k), http.StatusBadRequest)
		}
		if n := b.taskCount(t, id); n != 0 {
			t.Fatalf("%d tasks", n)
		}
	})

	t.Run("an API key's secret is replayed but not stored readable", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "idem-key@example.com")
		key := uuid.NewString()
		first := b.post(t, "/v1/api-keys", `{"name":"deploy"}`, token, key)
		second := b.post(t, "/v1/api-keys", `{"name":"deploy"}`, token, key)
		secret, _ := first.body["secret"].(string)
		if first.status != http.StatusCreated || second.body["secret"] != secret || secret == "" {
			t.Fatalf("replay: %s / %s", first.raw, second.raw)
		}
		var stored []byte
		if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT response FROM idempotency_keys WHERE key_hash = $1`, sha256Of(key)).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if len(stored) == 0 || bytes.Contains(stored, []byte(secret)) || bytes.Contains(stored, []byte("deploy")) {
			t.Fatalf("stored answer is readable: %q", stored)
		}
	})
}

// inFlight stores a record as a request in flight would, and returns its
// fingerprint.
func inFlight(t *testing.T, b *testBundle, userID, key, path, body string, lease time.Duration) []byte {
	t.Helper()
	h := fingerprintFor(http.MethodPost, path, "", []byte(body))
	_, err := b.server.opts.Pool.Exec(context.Background(), `
		INSERT INTO idempotency_keys (user_id, key_hash, fingerprint, claim, locked_until)
		VALUES ($1, $2, $3, gen_random_uuid(), now() + make_interval(secs => $4))`, userID, sha256Of(key), h, lease.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestPruneIdempotencyKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, id := b.register(t, "prune@example.com")
	ctx := context.Background()
	for _, row := range []struct {
		age, lease string
		status     *int
	}{
		{"25 hours", "-1 hour", new(201)},   // old, answered: pruned
		{"25 hours", "1 hour", nil},         // old but still in flight: kept
		{"1 hour", "-1 hour", new(201)},     // recent: kept
		{"25 hours", "-24 hours", nil},      // old, abandoned: pruned
		{"23 hours", "-23 hours", new(202)}, // within the day: kept
	} {
		_, err := b.server.opts.Pool.Exec(ctx, `
			INSERT INTO idempotency_keys (user_id, key_hash, fingerprint, claim, locked_until, status, created_at)
			VALUES ($1, $2, '\x00', gen_random_uuid(), now() + $3::interval, $4, now() - $5::interval)`,
			id, sha256Of(uuid.NewString()), row.lease, row.status, row.age)
		if err != nil {
			t.Fatal(err)
		}
	}
	n, err := PruneIdempotencyKeys(ctx, b.server.opts.Pool)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
}

// TestIdempotentEvent: a retried publish with its key is delivered once; a
// ticket request ignores the header (a replay would hand out a spent one).
func TestIdempotentEvent(t *testing.T) {
	t.Parallel()
	b := setupRealtime(t)
	token, id := b.register(t, "idem-event@example.com")
	conn := b.connect(t, token)
	key := uuid.NewString()
	body := `{"to":"` + id + `","event":"once"}`
	first := b.post(t, "/v1/events", body, token, key)
	second := b.post(t, "/v1/events", body, token, key)
	if first.status != http.StatusAccepted || !bytes.Equal(first.raw, second.raw) || second.header.Get(replayedHeader) != "true" {
		t.Fatalf("publish: %d %s / %s", first.status, first.raw, second.raw)
	}
	if res := b.post(t, "/v1/events", `{"to":"`+id+`","event":"after"}`, token, ""); res.status != http.StatusAccepted {
		t.Fatalf("sentinel: %d %s", res.status, res.raw)
	}
	// Frames to one user arrive in publish order: after "once" comes "after".
	if f := readFrame(t, conn); f.Event != "once" || f.ID != first.body["id"] {
		t.Fatalf("first frame %+v", f)
	}
	if f := readFrame(t, conn); f.Event != "after" {
		t.Fatalf("second frame %+v, want the sentinel: the retry was delivered again", f)
	}

	t1 := b.post(t, "/v1/ws/ticket", "", token, key+"-ticket")
	t2 := b.post(t, "/v1/ws/ticket", "", token, key+"-ticket")
	if t1.status != http.StatusCreated || t2.status != http.StatusCreated || t1.body["ticket"] == t2.body["ticket"] {
		t.Fatalf("tickets: %s / %s", t1.raw, t2.raw)
	}
}

func TestIdempotencyInOpenAPI(t *testing.T) {
	t.Parallel()
	b := setupRealtime(t)
	paths := b.do(t, http.MethodGet, "/openapi.json", nil, "").body["paths"].(map[string]any)
	header := func(path string) bool {
		params, _ := paths[path].(map[string]any)["post"].(map[string]any)["parameters"].([]any)
		for _, p := range params {
			if p.(map[string]any)["name"] == idempotencyHeader && p.(map[string]any)["in"] == "header" {
				return true
			}
		}
		return false
	}
	for _, p := range []string{"/v1/tasks", "/v1/tasks/{id}/runs", "/v1/events", "/v1/api-keys"} {
		if !header(p) {
			t.Errorf("POST %s does not document Idempotency-Key", p)
		}
	}
	for _, p := range []string{"/v1/ws/ticket", "/v1/auth/register"} {
		if header(p) {
			t.Errorf("POST %s documents Idempotency-Key, which it ignores", p)
		}
	}
}

// failingWriter is a client that went away.
type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestRecordingKeepsTheHandlersAnswer: when the client leaves while the body
// is written, Huma sets 499 after the handler's 201; the 201 and its whole
// body are what a retry must get.
func TestRecordingKeepsTheHandlersAnswer(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodPost, "/v1/tasks", nil)
	rc := &recordingContext{humaContext: humatest.NewContext(&huma.Operation{}, req, failingWriter{httptest.NewRecorder()}), header: http.Header{}}
	rc.SetStatus(http.StatusCreated)
	if _, err := rc.BodyWriter().Write([]byte(`{"id":"x"}`)); err == nil {
		t.Fatal("the client's write should fail")
	}
	rc.SetStatus(499)
	if rc.status != http.StatusCreated || rc.buf.String() != `{"id":"x"}` {
		t.Fatalf("kept %d %q", rc.status, rc.buf.String())
	}
}

// TestClaimOutlivesItsClient: the key's claim is written and read to its
// end even when the request's client has gone. A cancelled statement may
// still commit (the cancel reaches PostgreSQL before it starts the
// statement, and is dropped), which would leave the key in flight, with no
// request to answer or release it, for the whole lease: every retry with
// the key a 409.
func TestClaimOutlivesItsClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, id := b.register(t, "idem-claim-gone@example.com")
	gone, leave := context.WithCancel(context.Background())
	leave()
	key := uuid.NewString()
	req := idemRequest{userID: id, key: key, keyHash: sha256Of(key), fingerprint: fingerprintFor(http.MethodPost, "/v1/tasks", "", []byte(taskBody))}
	claim, found, err := b.server.claimKey(gone, req)
	if err != nil || claim == "" || found != nil {
		t.Fatalf("claim with the client gone: %q %v %v; want the claim", claim, found, err)
	}
	var held string
	if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT claim::text FROM idempotency_keys WHERE key_hash = $1`, req.keyHash).Scan(&held); err != nil || held != claim {
		t.Fatalf("stored claim %q (%v), want %q", held, err, claim)
	}
}

// TestKeyRecordedThroughADatabaseBlip: a key is claimed, a request's
// answer kept and a failed request's key given back even when the database
// drops the first tries (a restart, a failover). A key left claimed would answer every
// retry of that very request with 409 until its lease ends, two minutes
// later; an answer not kept lets a retry run the request again.
func TestKeyRecordedThroughADatabaseBlip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	proxy := dbtest.NewCutProxy(t, dbURL)
	pool, err := db.Connect(ctx, proxy.URL(dbURL), db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(Options{Pool: pool, Registry: prometheus.NewRegistry(), JWTSecret: testSecret, BcryptCost: 4})
	user := dbtest.User(t, pool, nil).ID
	// cutUntilRefused cuts the database off until a connection has been
	// refused.
	cutUntilRefused := func() {
		proxy.Cut()
		refused := proxy.Refused()
		go func() {
			for deadline := time.Now().Add(10 * time.Second); proxy.Refused() == refused && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			proxy.Restore()
		}()
	}
	// claimed claims a new key, then cuts the database off.
	claimed := func(t *testing.T) (idemRequest, string) {
		key := uuid.NewString()
		req := idemRequest{userID: user, key: key, keyHash: sha256Of(key), fingerprint: []byte{1}}
		claim, _, err := s.claimKey(ctx, req)
		if err != nil || claim == "" {
			t.Fatalf("claim: %q %v", claim, err)
		}
		cutUntilRefused()
		return req, claim
	}
	status := func(req idemRequest) (n int, status *int) {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT count(*), max(status) FROM idempotency_keys WHERE key_hash = $1`, req.keyHash).Scan(&n, &status)
		if err != nil {
			t.Fatal(err)
		}
		return n, status
	}

	key := uuid.NewString()
	req := idemRequest{userID: user, key: key, keyHash: sha256Of(key), fingerprint: []byte{1}}
	cutUntilRefused()
	if claim, _, err := s.claimKey(ctx, req); err != nil || claim == "" {
		t.Fatalf("claim through the blip: %q %v", claim, err)
	}

	req, claim := claimed(t)
	if err := s.releaseKey(ctx, req, claim); err != nil {
		t.Fatalf("release through the blip: %v", err)
	}
	if n, _ := status(req); n != 0 {
		t.Fatalf("%d records of the released key left, want none", n)
	}
	req, claim = claimed(t)
	if kept, err := s.keepAnswer(ctx, req, claim, http.StatusCreated, []byte("sealed")); !kept || err != nil {
		t.Fatalf("keep through the blip: %v %v", kept, err)
	}
	if n, st := status(req); n != 1 || st == nil || *st != http.StatusCreated {
		t.Fatalf("kept answer: %d records, status %v", n, st)
	}
}

// TestClaimFindsItsOwnRecord: a try of a claim whose earlier try committed
// but whose answer was lost (a connection broken after the statement)
// finds the record under its token and takes it as its own; a claim
// under another token finds the key in flight.
func TestClaimFindsItsOwnRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, id := b.register(t, "idem-own@example.com")
	key, token := uuid.NewString(), uuid.NewString()
	req := idemRequest{userID: id, key: key, keyHash: sha256Of(key), fingerprint: []byte{1}}
	ctx := context.Background()
	if _, err := b.server.opts.Pool.Exec(ctx, `
		INSERT INTO idempotency_keys (user_id, key_hash, fingerprint, claim, locked_until)
		VALUES ($1, $2, $3, $4, now() + interval '2 minutes')`, id, req.keyHash, req.fingerprint, token); err != nil {
		t.Fatal(err)
	}
	if claim, found, err := idemClaim(ctx, b.server.opts.Pool, req, token); err != nil || claim != token || found != nil {
		t.Fatalf("the same token: %q %v %v, want the claim", claim, found, err)
	}
	if claim, found, err := idemClaim(ctx, b.server.opts.Pool, req, uuid.NewString()); err != nil || claim != "" || found == nil || found.status != 0 {
		t.Fatalf("another token: %q %+v %v, want the key in flight", claim, found, err)
	}
}
