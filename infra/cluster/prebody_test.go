package cluster

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// untouchedBody fails a test that reads it: a request refused on its
// headers must be refused before its body is read (a caller could trickle
// that body for as long as it likes).
type untouchedBody struct{ t *testing.T }

func (b untouchedBody) Read([]byte) (int, error) {
	b.t.Errorf("the body of a request that cannot be valid was read")
	return 0, http.ErrBodyReadAfterClose
}

func TestInternalCallsRefusedBeforeTheirBody(t *testing.T) {
	t.Parallel()
	c := &Cluster{opts: Options{NodeID: "self", Secret: testSecret}}
	h := c.refuseOtherNodes(requireSignature(testSecret, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a refused call reached the handler")
	})))
	hexSig := "v1=" + strings.Repeat("ab", 32)
	now := time.Now()
	for _, tc := range []struct {
		name, path string
		headers    map[string]string
		want       int
	}{
		{"unsigned", "/internal/v1/nodes/self/drain", nil, http.StatusUnauthorized},
		{"malformed timestamp", "/internal/v1/nodes/self/drain", map[string]string{HeaderTimestamp: "soon", HeaderSignature: hexSig}, http.StatusUnauthorized},
		{"stale timestamp", "/internal/v1/nodes/self/drain", map[string]string{HeaderTimestamp: ts(now.Add(-time.Hour)), HeaderSignature: hexSig}, http.StatusUnauthorized},
		{"future timestamp", "/internal/v1/nodes/self/drain", map[string]string{HeaderTimestamp: ts(now.Add(time.Hour)), HeaderSignature: hexSig}, http.StatusUnauthorized},
		{"short signature", "/internal/v1/nodes/self/drain", map[string]string{HeaderTimestamp: ts(now), HeaderSignature: "v1=00"}, http.StatusUnauthorized},
		{"not hex", "/internal/v1/nodes/self/drain", map[string]string{HeaderTimestamp: ts(now), HeaderSignature: "v1=" + strings.Repeat("zz", 32)}, http.StatusUnauthorized},
		{"unknown version", "/internal/v1/nodes/self/drain", map[string]string{HeaderTimestamp: ts(now), HeaderSignature: "v2=" + strings.Repeat("ab", 32)}, http.StatusUnauthorized},
		{"another node", "/internal/v1/nodes/other/drain", map[string]string{HeaderTimestamp: ts(now), HeaderSignature: hexSig}, http.StatusMisdirectedRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodPost, tc.path, untouchedBody{t})
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tc.want)
			}
		})
	}
}

func ts(at time.Time) string { return strconv.FormatInt(at.Unix(), 10) }

// timedOutBody is a body whose read deadline passed.
type timedOutBody struct{}

func (timedOutBody) Read([]byte) (int, error) { return 0, os.ErrDeadlineExceeded }

func TestInternalBodyThatDoesNotArriveIs408(t *testing.T) {
	t.Parallel()
	h := requireSignature(testSecret, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("reached the handler")
	}))
	req := httptest.NewRequest(http.MethodPost, "/internal/v1/nodes/self/drain", timedOutBody{})
	Sign(req, testSecret, "", []byte("the body"), time.Now())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestTimeout {
		t.Fatalf("%d %s, want 408", rec.Code, rec.Body)
	}
}
