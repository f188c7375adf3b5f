package workers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/jobs"
)

// ExcerptLimit caps the response body kept on a run.
const ExcerptLimit = 1024

// DefaultOutputMax is the largest JSON response kept whole as a run's
// output (WebhookOptions.OutputMax).
const DefaultOutputMax = 64 << 10

// WebhookOptions configure the webhook client; zero values mean defaults.
type WebhookOptions struct {
	// AllowPrivate lets webhooks reach loopback, private, link-local and
	// CGNAT addresses (SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE). Metadata,
	// multicast and broadcast addresses stay refused.
	AllowPrivate bool
	// LookupIP resolves a host name; default the system resolver. Tests
	// inject names that resolve where they need.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// UserAgent of every call; default "Switchboard-Webhook/1".
	UserAgent string
	// MaxRedirects followed (each checked by the guard); default 3.
	MaxRedirects int
	// TracerProvider gives each call a span and the target a traceparent
	// header; nil, tracing off, neither.
	TracerProvider trace.TracerProvider
	// OutputMax is the largest 2xx JSON body kept whole as the run's
	// output (SWITCHBOARD_RUN_OUTPUT_MAX_BYTES); default DefaultOutputMax.
	OutputMax int
	// Metrics records each call's duration by status class; nil records
	// nothing. workers.Options.Metrics sets it for the run worker.
	Metrics *jobs.Metrics
}

// WebhookClient makes signed webhook calls that cannot reach addresses the
// SSRF guard refuses: every connection, including one made for a redirect,
// is checked against the IP it actually connects to.
type WebhookClient struct {
	http *http.Client
	opts WebhookOptions
	// trusted lets tests reach one loopback server (a redirector) while
	// everything else stays guarded.
	trusted netip.AddrPort
}

// NewWebhookClient builds the client.
func NewWebhookClient(opts WebhookOptions) *WebhookClient {
	opts.UserAgent = cmp.Or(opts.UserAgent, "Switchboard-Webhook/1")
	opts.MaxRedirects = cmp.Or(opts.MaxRedirects, 3)
	opts.OutputMax = cmp.Or(opts.OutputMax, DefaultOutputMax)
	if opts.LookupIP == nil {
		opts.LookupIP = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	c := &WebhookClient{opts: opts}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would connect for us, past the guard
		DialContext:           c.dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   DefaultMaxWorkers, // runs often call one customer's endpoint concurrently
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	c.http = &http.Client{Transport: newTracedTransport(transport, opts.TracerProvider), CheckRedirect: c.checkRedirect}
	return c
}

func (c *WebhookClient) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > c.opts.MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", c.opts.MaxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirect to a %s URL", jobs.ErrBlockedTarget, req.URL.Scheme)
	}
	// A task's headers (often credentials) are for the host it names; the
	// client only drops Authorization and cookies, and only across domains.
	if !sameOrigin(req.URL, via[0].URL) {
		for k := range req.Header {
			if !ownHeaders[http.CanonicalHeaderKey(k)] {
				req.Header.Del(k)
			}
		}
	}
	return nil
}

// ownHeaders are the headers Send sets itself; they follow a redirect to
// another host (the signature covers only id, timestamp and body).
var ownHeaders = map[string]bool{
	"Content-Type": true, "User-Agent": true, "Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true,
}

// sameOrigin compares scheme, host and effective port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && effectivePort(a) == effectivePort(b)
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// dial resolves the host, refuses blocked addresses, and connects to the
// checked address; the dialer's Control re-checks the socket's peer.
func (c *WebhookClient) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = c.opts.LookupIP(ctx, host); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: c.control}
	var errs []error
	for _, ip := range ips {
		if err := c.check(ip, port); err != nil {
			errs = append(errs, fmt.Errorf("%s resolves to %w", host, err))
			continue
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	return nil, errors.Join(errs...)
}

// control runs after the socket is made and before it connects, with the
// address it connects to: the last word on where the call goes.
func (c *WebhookClient) control(_, address string, _ syscall.RawConn) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: connect to %q", jobs.ErrBlockedTarget, address)
	}
	return c.check(ip, port)
}

func (c *WebhookClient) check(ip netip.Addr, port string) error {
	if c.trusted.IsValid() && c.trusted.Addr() == ip.Unmap() && strconv.Itoa(int(c.trusted.Port())) == port {
		return nil
	}
	return jobs.CheckTargetIP(ip, c.opts.AllowPrivate)
}

// WebhookRequest is one signed call.
type WebhookRequest struct {
	URL     string
	Method  string
	Headers map[string]string
	Body    []byte
	// MsgID is the Standard Webhooks message id: the same across retries.
	MsgID string
	// Secret is the task's whsec_ signing secret.
	Secret string
	// PreviousSecret, when set, signs the call too (a rotation's overlap):
	// webhook-signature then carries both signatures, current first.
	PreviousSecret string
}

// WebhookResponse is what came back.
type WebhookResponse struct {
	Status     int
	Excerpt    string
	RetryAfter time.Duration // 0: none given
	// Output is a 2xx answer's JSON body (nil: none, or not JSON);
	// OutputTruncated: it was larger than OutputMax and Output is a JSON
	// string of its first OutputMax bytes.
	Output          json.RawMessage
	OutputTruncated bool
}

// Send signs and makes the call. An error means no HTTP response arrived
// (refused target, network error, timeout).
func (c *WebhookClient) Send(ctx context.Context, r WebhookRequest) (WebhookResponse, error) {
	keys, err := signingKeys(r.Secret, r.PreviousSecret)
	if err != nil {
		return WebhookResponse{}, err
	}
	ts := time.Now()
	var body io.Reader
	if r.Method != http.MethodGet {
		body = bytes.NewReader(r.Body)
	} else {
		r.Body = nil
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
	if err != nil {
		return WebhookResponse{}, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	req.Header.Set("webhook-id", r.MsgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", signatures(keys, r.MsgID, ts, r.Body))
	res, err := c.http.Do(req)
	if err != nil {
		if !errors.Is(err, jobs.ErrBlockedTarget) { // a refused target was never called
			c.opts.Metrics.WebhookCall(0, time.Since(ts))
		}
		return WebhookResponse{}, err
	}
	defer res.Body.Close()
	out := WebhookResponse{Status: res.StatusCode, RetryAfter: parseRetryAfter(res.Header.Get("Retry-After"), time.Now())}
	answer, _ := io.ReadAll(io.LimitReader(res.Body, int64(c.opts.OutputMax)+1))
	out.Excerpt = excerpt(answer)
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // so the connection can be reused
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		out.Output, out.OutputTruncated = output(answer, c.opts.OutputMax, res.Header.Get("Content-Type"))
	}
	c.opts.Metrics.WebhookCall(res.StatusCode, time.Since(ts))
	return out, nil
}

// output is the run's output from a 2xx body read up to max+1 bytes: the
// body itself when it is at most max bytes of JSON jsonb takes; when
// longer and declared JSON, a JSON string of its first max bytes
// (truncated); otherwise nil.
func output(body []byte, max int, contentType string) (json.RawMessage, bool) {
	if len(body) <= max {
		if jobs.StorableJSON(body) {
			return body, false
		}
		return nil, false
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return nil, false
	}
	cut, _ := json.Marshal(validText(body[:max]))
	return cut, true
}

// signingKeys decodes the secrets that sign a call: the current one, and
// the previous one if any.
func signingKeys(secret, previous string) ([][]byte, error) {
	key, err := jobs.SigningKey(secret)
	if err != nil {
		return nil, err
	}
	if previous == "" {
		return [][]byte{key}, nil
	}
	prev, err := jobs.SigningKey(previous)
	if err != nil {
		return nil, fmt.Errorf("previous %w", err)
	}
	return [][]byte{key, prev}, nil
}

// signatures is the webhook-signature header of a call signed with each
// key: their signatures separated by spaces, as the Standard Webhooks spec
// lets a sender list several (a receiver accepts a match with any).
func signatures(keys [][]byte, msgID string, ts time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = Sign(k, msgID, ts, body)
	}
	return strings.Join(sigs, " ")
}

// Sign returns the webhook-signature header value of the Standard Webhooks
// spec: "v1," and the base64 HMAC-SHA256 of "<id>.<unix timestamp>.<body>".
func Sign(key []byte, msgID string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// excerpt keeps the first ExcerptLimit bytes of body as valid UTF-8 text.
func excerpt(body []byte) string {
	return validText(body[:min(len(body), ExcerptLimit)])
}

// validText is b as valid UTF-8 text without NUL, a rune cut at its end
// dropped.
func validText(b []byte) string {
	// Drop a rune the limit cut in half rather than mangle it.
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.Valid(b); i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			break
		}
		b = b[:len(b)-1]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// parseRetryAfter reads delay-seconds or an HTTP date, capped at an hour.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}
