package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of a signed node-to-node request.
const (
	HeaderTimestamp = "X-Switchboard-Timestamp"
	HeaderSignature = "X-Switchboard-Signature"
	HeaderNode      = "X-Switchboard-Node"
)

// MaxSkew is how far a signed request's timestamp may be from the receiver's
// clock. Within it a captured request can be replayed; every internal action
// is idempotent (a second drain or disconnect changes nothing more) and names
// its target node in the signed path, so a replay can't be aimed elsewhere.
const MaxSkew = 30 * time.Second

// maxSignedBody bounds what a receiver reads to check a signature.
const maxSignedBody = 1 << 20

// signature is hex HMAC-SHA256, keyed by the cluster secret, over the method,
// the request URI (path and query, as sent), the Unix timestamp and the hex
// SHA-256 of the body, newline-separated.
func signature(secret []byte, method, requestURI, ts string, body []byte) string {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%s\n%s\n%s\n%s", method, requestURI, ts, hex.EncodeToString(sum[:]))
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Sign sets the signature headers on req, whose body is body.
func Sign(req *http.Request, secret []byte, from string, body []byte, now time.Time) {
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, signature(secret, req.Method, req.URL.RequestURI(), ts, body))
	if from != "" {
		req.Header.Set(HeaderNode, from)
	}
}

// verify checks r's signature and gives the body back to r for the handler.
// Everything that can be refused without the body is checked before it is
// read.
func verify(r *http.Request, secret []byte, now time.Time) error {
	ts, sig := r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature)
	if ts == "" || sig == "" {
		return errors.New("internal route: the request is not signed by a cluster node")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("internal route: malformed " + HeaderTimestamp)
	}
	if !wellFormedSignature(sig) {
		return errors.New("internal route: malformed " + HeaderSignature)
	}
	if skew := now.Sub(time.Unix(sec, 0)); skew > MaxSkew || skew < -MaxSkew {
		return fmt.Errorf("internal route: the signature's timestamp is %s away from this node's clock (at most %s allowed)", skew.Round(time.Second), MaxSkew)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSignedBody+1))
	if err != nil {
		return fmt.Errorf("internal route: read body: %w", err)
	}
	if len(body) > maxSignedBody {
		return errors.New("internal route: body too large")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	if !hmac.Equal([]byte(sig), []byte(signature(secret, r.Method, uri, ts, body))) {
		return errors.New("internal route: the signature does not match the request")
	}
	return nil
}

// wellFormedSignature reports whether sig could be one signature wrote:
// checked, like the headers and the timestamp, before the body is read.
func wellFormedSignature(sig string) bool {
	h, ok := strings.CutPrefix(sig, "v1=")
	_, err := hex.DecodeString(h)
	return ok && len(h) == 2*sha256.Size && err == nil
}

type internalKey struct{}

// requireSignature answers 401 unless the request is signed with the
// cluster secret; signed requests are marked so nothing fans them out again.
func requireSignature(secret []byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := verify(r, secret, time.Now()); err != nil {
			status := http.StatusUnauthorized
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				status = http.StatusRequestTimeout // the body did not arrive in time
			}
			writeProblem(w, status, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), internalKey{}, true)))
	})
}

// IsInternal reports whether ctx belongs to a signed node-to-node request:
// such a request is applied on this node only, never forwarded or fanned out.
func IsInternal(ctx context.Context) bool {
	v, _ := ctx.Value(internalKey{}).(bool)
	return v
}

// writeProblem writes an RFC 9457 body.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": detail})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// trimDetail shortens an error body for a message.
func trimDetail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
