package web

import (
	"bytes"
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/db"
)

// Idempotency-Key on authenticated POSTs: the first answer to a key, per
// credential (the account's signed-in sessions share one; each API key is
// its own), is kept for 24 h and replayed to every later request of that
// credential with the same key, on any replica. Another credential of the
// account using the same key does not see that answer: its request runs
// with its own rights. A replay comes after authentication and the route's
// checks of the current credential (this middleware runs last). A
// second request while the first is in flight waits for its answer (up to
// idempotencyWait, then 409); the same key on a different request (method,
// path or body, byte for byte) is a 422. Only 2xx answers are kept: any
// other answer changed nothing, so the key is released and a retry runs
// again.
//
// Every authenticated POST gets this by default (new routes too); the
// operations in notIdempotent opt out.

const (
	idempotencyHeader = "Idempotency-Key"
	replayedHeader    = "Idempotent-Replayed"
	// IdempotencyTTL is how long an answer is replayed.
	IdempotencyTTL = 24 * time.Hour
	// idempotencyLease: a first request not finished by then is taken for
	// dead (its replica crashed) and the key may be claimed again. Requests
	// are bounded far below it (RPC waits at most 30 s).
	idempotencyLease = 2 * time.Minute
	idempotencyWait  = 5 * time.Second
	idempotencyPoll  = 50 * time.Millisecond
	// idempotencyClaimTimeout bounds a claim's statement, which runs on
	// when the client leaves (see claimKey).
	idempotencyClaimTimeout = 5 * time.Second
	// idempotencyRecordFor is how long keeping an answer or releasing a
	// key is tried while the database is unreachable.
	idempotencyRecordFor = 15 * time.Second
	maxIdempotencyKey    = 255
)

// notIdempotent are the authenticated POSTs Idempotency-Key does not apply
// to, with why.
var notIdempotent = map[string]string{
	"ws-ticket": "a ticket is single use: a retry should get a new one, and a replay would hand out a spent ticket",
}

// idempotencyOutcomes counts keyed requests by what became of them:
// executed (ran and kept its answer), replayed, in_flight (409),
// mismatch (422), released (answered non-2xx, key freed).
func newIdempotencyOutcomes(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_idempotency_requests_total",
		Help: "POSTs with an Idempotency-Key by outcome: executed, replayed, in_flight, mismatch, released.",
	}, []string{"outcome"})
	reg.MustRegister(c)
	return c
}

// idemRequest identifies one request under a key.
type idemRequest struct {
	userID      string
	key         string
	keyHash     []byte
	fingerprint []byte
}

// storedAnswer is what is replayed, encrypted at rest.
type storedAnswer struct {
	Header http.Header `json:"h"`
	Body   []byte      `json:"b"`
}

// idempotent is Huma middleware, the last one: see the comment above.
func (s *Server) idempotent(ctx huma.Context, next func(huma.Context)) {
	raw := ctx.Header(idempotencyHeader)
	op := ctx.Operation()
	p, ok := ctx.Context().Value(principalKey{}).(Principal)
	if raw == "" || !ok || op.Method != http.MethodPost || notIdempotent[op.OperationID] != "" {
		next(ctx)
		return
	}
	key, err := parseIdempotencyKey(raw)
	if err != nil {
		_ = huma.WriteErr(s.api, ctx, http.StatusBadRequest, err.Error())
		return
	}
	rc := &recordingContext{humaContext: ctx, header: http.Header{}}
	var body []byte
	if op.RequestBody != nil {
		limit := cmp.Or(op.MaxBodyBytes, 1<<20)
		if op.BodyReadTimeout > 0 { // as Huma would, had it read the body itself
			_ = ctx.SetReadDeadline(time.Now().Add(op.BodyReadTimeout))
		}
		body, err = io.ReadAll(io.LimitReader(ctx.BodyReader(), limit+1))
		if err != nil || int64(len(body)) > limit {
			// Too large or unreadable: Huma answers it (413, 408), nothing to keep.
			rc.body = io.MultiReader(bytes.NewReader(body), ctx.BodyReader())
			next(rc)
			return
		}
		rc.body = bytes.NewReader(body)
	}
	req := idemRequest{userID: p.UserID, key: credentialKey(p, key), fingerprint: fingerprintOf(ctx, body)}
	req.keyHash = sha256Of(req.key)
	s.runIdempotent(rc, next, req)
}

// credentialKey is the client's key as stored: scoped to the API key that
// sent it, or as it is for the account's signed-in sessions.
func credentialKey(p Principal, key string) string {
	if p.KeyID == "" {
		return key
	}
	return "api-key " + p.KeyID + "\x00" + key
}

// runIdempotent claims the key and runs the request, or replays, refuses or
// waits for the answer of the request that holds it.
func (s *Server) runIdempotent(rc *recordingContext, next func(huma.Context), req idemRequest) {
	ctx := rc.humaContext.Context()
	deadline := time.Now().Add(cmp.Or(s.idemWait, idempotencyWait))
	for {
		claim, found, err := s.claimKey(ctx, req)
		switch {
		case err != nil:
			s.idemFailure(ctx, err)
			s.writeHumaInternal(rc.humaContext, err)
			return
		case claim != "":
			s.runAndKeep(rc, next, req, claim)
			return
		case found != nil && !bytes.Equal(found.fingerprint, req.fingerprint):
			s.idemOutcomes.WithLabelValues("mismatch").Inc()
			_ = huma.WriteErr(s.api, rc.humaContext, http.StatusUnprocessableEntity,
				"this Idempotency-Key was used within 24 h for a different request (method, path or body); use a new key for a new request")
			return
		case found != nil && found.status != 0:
			s.idemOutcomes.WithLabelValues("replayed").Inc()
			s.replay(rc.humaContext, req, found)
			return
		case time.Now().After(deadline):
			s.idemOutcomes.WithLabelValues("in_flight").Inc()
			rc.humaContext.SetHeader("Retry-After", "1")
			_ = huma.WriteErr(s.api, rc.humaContext, http.StatusConflict,
				"a request with this Idempotency-Key is still in flight; retry shortly to get its answer")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(idempotencyPoll):
		}
	}
}

// runAndKeep runs the request that claimed the key and keeps a 2xx answer;
// any other answer, or a panic, releases the key.
func (s *Server) runAndKeep(rc *recordingContext, next func(huma.Context), req idemRequest, claim string) {
	ctx := context.WithoutCancel(rc.humaContext.Context())
	kept := false
	defer func() {
		outcome := "executed"
		if !kept {
			outcome = "released"
		}
		s.idemOutcomes.WithLabelValues(outcome).Inc()
		if !kept {
			if err := s.releaseKey(ctx, req, claim); err != nil {
				s.opts.Logger.WarnContext(ctx, "release an idempotency key", "error", err)
			}
		}
	}()
	next(rc)
	if rc.status < 200 || rc.status > 299 {
		return
	}
	rc.header.Del("Set-Cookie")
	sealed, err := s.sealAnswer(req, storedAnswer{Header: rc.header, Body: rc.buf.Bytes()})
	if err == nil {
		kept, err = s.keepAnswer(ctx, req, claim, rc.status, sealed)
	}
	if err != nil || !kept {
		s.opts.Logger.WarnContext(ctx, "keep the answer of an idempotent request", "kept", kept, "error", err)
	}
}

func (s *Server) replay(ctx huma.Context, req idemRequest, found *idemRow) {
	a, err := s.openAnswer(req, found.response)
	if err != nil {
		_ = huma.WriteErr(s.api, ctx, http.StatusConflict,
			"the first answer to this Idempotency-Key can no longer be read (the server's secret changed); use a new key")
		return
	}
	for name, values := range a.Header {
		for i, v := range values {
			if i == 0 {
				ctx.SetHeader(name, v)
			} else {
				ctx.AppendHeader(name, v)
			}
		}
	}
	ctx.SetHeader(replayedHeader, "true")
	ctx.SetStatus(found.status)
	_, _ = ctx.BodyWriter().Write(a.Body)
}

// releaseKey is idemRelease, tried again while the database is
// unreachable (for up to idempotencyRecordFor): a key left claimed would
// answer every retry of the failed request with 409 until its lease ends.
func (s *Server) releaseKey(ctx context.Context, req idemRequest, claim string) error {
	return db.RetryTransient(ctx, idempotencyRecordFor, func() error {
		return idemRelease(ctx, s.opts.Pool, req, claim)
	})
}

// keepAnswer is idemComplete, tried again as releaseKey is: an answer not
// kept releases the key, and a retry of the request runs it again.
func (s *Server) keepAnswer(ctx context.Context, req idemRequest, claim string, status int, sealed []byte) (kept bool, err error) {
	err = db.RetryTransient(ctx, idempotencyRecordFor, func() error {
		kept, err = idemComplete(ctx, s.opts.Pool, req, claim, status, sealed)
		return err
	})
	return kept, err
}

// claimKey is idemClaim, run to its end even when the request's client
// has gone, and tried again with the same claim while the database is
// unreachable (both bounded by idempotencyClaimTimeout), so the request
// that made the claim always knows it and answers or releases it (a
// client gone makes the handler fail, which releases the key). A claim
// whose answer was lost — a statement abandoned on cancellation (the
// cancel reaches PostgreSQL before the statement starts, and is dropped),
// a connection that broke after the statement — may have committed; with
// nothing to answer or release it the key would be in flight until the
// lease ends. The try that follows finds it and takes it as its own.
func (s *Server) claimKey(ctx context.Context, req idemRequest) (claim string, found *idemRow, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), idempotencyClaimTimeout)
	defer cancel()
	token := uuid.NewString()
	err = db.RetryTransient(ctx, idempotencyClaimTimeout, func() error {
		claim, found, err = idemClaim(ctx, s.opts.Pool, req, token)
		return err
	})
	return claim, found, err
}

// idemFailure logs an unexpected error of the idempotency store.
func (s *Server) idemFailure(ctx context.Context, err error) {
	if !errors.Is(err, context.Canceled) {
		s.opts.Logger.ErrorContext(ctx, "idempotency key", "error", err)
	}
}

// parseIdempotencyKey accepts 1-255 visible ASCII characters, bare or as a
// quoted string (the IETF draft's Structured Field form): both are one key.
func parseIdempotencyKey(raw string) (string, error) {
	k := strings.TrimSpace(raw)
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	bad := k == "" || len(k) > maxIdempotencyKey
	for i := 0; i < len(k) && !bad; i++ {
		bad = k[i] < 0x21 || k[i] > 0x7e
	}
	if bad {
		return "", fmt.Errorf("%s must be 1-%d visible ASCII characters (a random UUID is a good choice)", idempotencyHeader, maxIdempotencyKey)
	}
	return k, nil
}

func sha256Of(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// fingerprintOf is what makes two requests "the same": method, path, query
// and body, byte for byte.
func fingerprintOf(ctx huma.Context, body []byte) []byte {
	u := ctx.URL()
	return fingerprintFor(ctx.Method(), u.Path, u.RawQuery, body)
}

func fingerprintFor(method, path, query string, body []byte) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", method, path, query)
	h.Write(body)
	return h.Sum(nil)
}

// answerCipher is AES-256-GCM with a key derived from the server's secret,
// the caller and the Idempotency-Key: what the database holds is useless
// without both the server's secret and the client's key (answers may carry
// secrets shown once: an API key's, a task's signing secret).
func (s *Server) answerCipher(req idemRequest) (cipher.AEAD, error) {
	m := hmac.New(sha256.New, s.tokens.secret)
	fmt.Fprintf(m, "switchboard idempotent answer v1\x00%s\x00%s", req.userID, req.key)
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func (s *Server) sealAnswer(req idemRequest, a storedAnswer) ([]byte, error) {
	plain, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	aead, err := s.answerCipher(req)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, plain, req.keyHash), nil
}

func (s *Server) openAnswer(req idemRequest, sealed []byte) (storedAnswer, error) {
	var a storedAnswer
	aead, err := s.answerCipher(req)
	if err != nil {
		return a, err
	}
	if len(sealed) < aead.NonceSize() {
		return a, errors.New("sealed answer too short")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], req.keyHash)
	if err != nil {
		return a, err
	}
	return a, json.Unmarshal(plain, &a)
}

// humaContext lets recordingContext embed huma.Context under a name that
// does not hide its Context method.
type humaContext = huma.Context

// recordingContext passes a request through while keeping what it answers;
// it also hands the handler the body the middleware read.
type recordingContext struct {
	humaContext
	body   io.Reader
	status int
	header http.Header
	buf    bytes.Buffer
}

func (c *recordingContext) BodyReader() io.Reader {
	if c.body != nil {
		return c.body
	}
	return c.humaContext.BodyReader()
}

// SetStatus keeps the first status: the one the handler answered. Huma sets
// 499 afterwards when the client left while the body was written, and that
// request is the very one a retry must not run again.
func (c *recordingContext) SetStatus(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.humaContext.SetStatus(code)
}

func (c *recordingContext) SetHeader(name, value string) {
	c.header.Set(name, value)
	c.humaContext.SetHeader(name, value)
}

func (c *recordingContext) AppendHeader(name, value string) {
	c.header.Add(name, value)
	c.humaContext.AppendHeader(name, value)
}

func (c *recordingContext) BodyWriter() io.Writer {
	return io.MultiWriter(&c.buf, c.humaContext.BodyWriter()) // the copy first: the client may be gone
}

// Data layer of idempotency_keys.

type idemRow struct {
	fingerprint []byte
	status      int
	response    []byte
}

// idemClaim takes the key for this request under the claim token,
// returning the claim, or returns the row that holds it. A row older than
// the TTL, or in flight past its lease, is taken over; a row in flight
// under this very token (an earlier try whose answer was lost) is this
// request's claim. Neither (the holder committed after this statement's
// snapshot) means: ask again.
func idemClaim(ctx context.Context, q db.DB, req idemRequest, token string) (claim string, found *idemRow, err error) {
	rows, err := q.Query(ctx, `
		WITH claimed AS (
			INSERT INTO idempotency_keys (user_id, key_hash, fingerprint, claim, locked_until)
			VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
			ON CONFLICT (user_id, key_hash) DO UPDATE
				SET fingerprint = EXCLUDED.fingerprint, claim = EXCLUDED.claim, locked_until = EXCLUDED.locked_until,
				    status = NULL, response = NULL, created_at = now()
				WHERE idempotency_keys.created_at < now() - make_interval(secs => $6)
				   OR (idempotency_keys.status IS NULL AND idempotency_keys.locked_until < now())
			RETURNING claim::text
		)
		SELECT claim, NULL::bytea, NULL::integer, NULL::bytea FROM claimed
		UNION ALL
		SELECT CASE WHEN claim = $4 AND status IS NULL THEN claim::text END, fingerprint, status, response FROM idempotency_keys
		WHERE user_id = $1 AND key_hash = $2 AND NOT EXISTS (SELECT FROM claimed)`,
		req.userID, req.keyHash, req.fingerprint, token, idempotencyLease.Seconds(), IdempotencyTTL.Seconds())
	if err != nil {
		return "", nil, fmt.Errorf("claim idempotency key: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c *string
		var status *int
		r := &idemRow{}
		if err := rows.Scan(&c, &r.fingerprint, &status, &r.response); err != nil {
			return "", nil, fmt.Errorf("claim idempotency key: %w", err)
		}
		if c != nil {
			return *c, nil, nil
		}
		if status != nil {
			r.status = *status
		}
		found = r
	}
	return "", found, rows.Err()
}

// idemComplete keeps the answer if this request still holds the claim.
func idemComplete(ctx context.Context, q db.DB, req idemRequest, claim string, status int, sealed []byte) (bool, error) {
	tag, err := q.Exec(ctx, `
		UPDATE idempotency_keys SET status = $4, response = $5
		WHERE user_id = $1 AND key_hash = $2 AND claim = $3`, req.userID, req.keyHash, claim, status, sealed)
	if err != nil {
		return false, fmt.Errorf("keep idempotent answer: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func idemRelease(ctx context.Context, q db.DB, req idemRequest, claim string) error {
	_, err := q.Exec(ctx, `DELETE FROM idempotency_keys WHERE user_id = $1 AND key_hash = $2 AND claim = $3`,
		req.userID, req.keyHash, claim)
	return err
}

// PruneIdempotencyKeys deletes the records no request may replay any more
// (older than IdempotencyTTL, and not in flight): a maintenance job.
func PruneIdempotencyKeys(ctx context.Context, q db.DB) (int64, error) {
	tag, err := q.Exec(ctx, `
		DELETE FROM idempotency_keys
		WHERE created_at < now() - make_interval(secs => $1) AND (status IS NOT NULL OR locked_until < now())`,
		IdempotencyTTL.Seconds())
	if err != nil {
		return 0, fmt.Errorf("prune idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

// documentIdempotency adds the Idempotency-Key header to the OpenAPI
// operations the middleware applies to (an OnAddOperation hook).
func documentIdempotency(_ *huma.OpenAPI, op *huma.Operation) {
	if op.Method != http.MethodPost || len(op.Security) == 0 || notIdempotent[op.OperationID] != "" {
		return
	}
	op.Parameters = append(op.Parameters, &huma.Param{
		Name: idempotencyHeader, In: "header",
		Description: "optional, 1-255 visible ASCII characters: the same key from the same account within 24 h replays the first 2xx answer " +
			"(with Idempotent-Replayed: true); a different request under the key is a 422, one still in flight a 409",
		Schema: &huma.Schema{Type: huma.TypeString, MinLength: new(1), MaxLength: new(maxIdempotencyKey)},
	})
}
