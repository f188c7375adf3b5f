package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

var testSecret = []byte("cluster-test-secret-0123456789")

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Now()
	signed := func(body string, at time.Time, secret []byte) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/internal/v1/nodes/n1/drain?x=1", bytes.NewBufferString(body))
		Sign(req, secret, "n0", []byte(body), at)
		return req
	}
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		ok   bool
	}{
		{"valid", func() *http.Request { return signed(`{"a":1}`, now, testSecret) }, true},
		{"valid, empty body", func() *http.Request { return signed("", now, testSecret) }, true},
		{"valid, 20 s old", func() *http.Request { return signed("", now.Add(-20*time.Second), testSecret) }, true},
		{"unsigned", func() *http.Request { return httptest.NewRequest(http.MethodPost, "/internal/v1/nodes/n1/drain", nil) }, false},
		{"timestamp only", func() *http.Request {
			r := signed("", now, testSecret)
			r.Header.Del(HeaderSignature)
			return r
		}, false},
		{"other secret", func() *http.Request { return signed("", now, []byte("another-secret-0123456789")) }, false},
		{"replayed old timestamp", func() *http.Request { return signed("", now.Add(-31*time.Second), testSecret) }, false},
		{"timestamp from the future", func() *http.Request { return signed("", now.Add(time.Minute), testSecret) }, false},
		{"timestamp moved after signing", func() *http.Request {
			r := signed("", now.Add(-40*time.Second), testSecret)
			r.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
			return r
		}, false},
		{"valid signature over a different body", func() *http.Request {
			r := signed(`{"a":1}`, now, testSecret)
			r.Body = io.NopCloser(bytes.NewBufferString(`{"a":2}`))
			return r
		}, false},
		{"valid signature for another path", func() *http.Request {
			r := signed("", now, testSecret)
			other := httptest.NewRequest(http.MethodPost, "/internal/v1/nodes/n2/drain?x=1", nil)
			other.Header = r.Header
			return other
		}, false},
		{"valid signature for another method", func() *http.Request {
			r := signed("", now, testSecret)
			other := httptest.NewRequest(http.MethodDelete, "/internal/v1/nodes/n1/drain?x=1", nil)
			other.Header = r.Header
			return other
		}, false},
		{"garbage timestamp", func() *http.Request {
			r := signed("", now, testSecret)
			r.Header.Set(HeaderTimestamp, "yesterday")
			return r
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.req()
			err := verify(r, testSecret, now)
			if (err == nil) != tc.ok {
				t.Fatalf("verify: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestVerifyKeepsTheBody(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodPost, "/x", bytes.NewBufferString("hello"))
	Sign(req, testSecret, "", []byte("hello"), time.Now())
	if err := verify(req, testSecret, time.Now()); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(req.Body); string(b) != "hello" {
		t.Fatalf("body after verify: %q", b)
	}
}

func TestRequireSignatureAnswersProblem(t *testing.T) {
	t.Parallel()
	reached := false
	h := requireSignature(testSecret, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = IsInternal(r.Context())
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/internal/v1/nodes/x/status", nil))
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("Content-Type") != "application/problem+json" || body["detail"] == "" || reached {
		t.Fatalf("unsigned: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	req := httptest.NewRequest(http.MethodGet, "/internal/v1/nodes/x/status", nil)
	Sign(req, testSecret, "", nil, time.Now())
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !reached {
		t.Fatalf("signed: %d, reached internal handler: %v", rec.Code, reached)
	}
}
