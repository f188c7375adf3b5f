package workers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard/switchboard/jobs"
)

// verifySpec checks a request the way the Standard Webhooks spec describes,
// written from the spec text rather than from the signer: the secret is the
// base64 part after "whsec_"; the signed content is
// "{webhook-id}.{webhook-timestamp}.{body}"; the header is a space-separated
// list of "v1,{base64 HMAC-SHA256}" and one of them must match; the
// timestamp must be within five minutes of now.
func verifySpec(secret string, h http.Header, body []byte) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return errors.New("bad timestamp")
	}
	key, err := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if ok && version == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

func TestWebhookSignature(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{allowPrivate: true})
	hook := newHookServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 0 {
			w.WriteHeader(http.StatusServiceUnavailable) // one retry: the id must not change
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	task := b.task(t, jobs.Action{Type: jobs.ActionWebhook, URL: hook.URL + "/hook", Headers: map[string]string{"X-Tenant": "acme"}, Body: []byte(`{"hello":"world","n":12345678901234567890}`)})
	run := b.trigger(t, task.ID)
	if got := b.waitRun(t, run.ID, 10*time.Second); got.Status != jobs.StatusSucceeded || got.Attempt != 2 {
		t.Fatalf("run: %+v", got)
	}
	lib, err := standardwebhooks.NewWebhook(task.SigningSecret)
	if err != nil {
		t.Fatal(err)
	}
	hits := hook.requests()
	if len(hits) != 2 {
		t.Fatalf("%d requests, want 2", len(hits))
	}
	for i, h := range hits {
		if err := verifySpec(task.SigningSecret, h.header, h.body); err != nil {
			t.Errorf("request %d: independent verification: %v", i, err)
		}
		if err := lib.Verify(h.body, h.header); err != nil {
			t.Errorf("request %d: standard-webhooks library: %v", i, err)
		}
		if h.header.Get("webhook-id") != run.ID {
			t.Errorf("request %d: webhook-id %q, want the run id %s", i, h.header.Get("webhook-id"), run.ID)
		}
		var body map[string]any
		// jsonb keeps the value, not the spelling: keys may reorder, big numbers stay exact.
		if json.Unmarshal(h.body, &body) != nil || body["hello"] != "world" || !strings.Contains(string(h.body), "12345678901234567890") ||
			h.header.Get("X-Tenant") != "acme" || h.header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: body %s headers %v", i, h.body, h.header)
		}
		if h.header.Get("X-Switchboard-Attempt") != strconv.Itoa(i+1) || h.header.Get("X-Switchboard-Task-Id") != task.ID {
			t.Errorf("request %d: switchboard headers %v", i, h.header)
		}
	}
	tampered := hits[1].header.Clone()
	tampered.Set("webhook-id", uuidLike)
	if verifySpec(task.SigningSecret, tampered, hits[1].body) == nil || lib.Verify(hits[1].body, tampered) == nil {
		t.Fatal("a tampered webhook-id still verifies")
	}
	if verifySpec(task.SigningSecret, hits[1].header, append(hits[1].body, ' ')) == nil {
		t.Fatal("a tampered body still verifies")
	}
}

const uuidLike = "00000000-0000-4000-8000-000000000000"

func TestSign(t *testing.T) {
	t.Parallel()
	// Example from the Standard Webhooks spec repository's test vectors.
	key, _ := jobs.SigningKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestSSRFGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	victim := newHookServer(t, func(int, http.ResponseWriter, *http.Request) {})
	_, victimPort, _ := net.SplitHostPort(victim.Listener.Addr().String())
	resolver := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "internal.example.com":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		case "mixed.example.com":
			return []netip.Addr{netip.MustParseAddr("192.168.0.10"), netip.MustParseAddr("fd00:ec2::254")}, nil
		case "loopback.example.com":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	client := NewWebhookClient(WebhookOptions{LookupIP: resolver})
	// The redirector is the one loopback server the guard lets through.
	redirector := newHookServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
	})
	client.trusted = netip.MustParseAddrPort(redirector.Listener.Addr().String())
	secret := jobs.NewSigningSecret()
	send := func(url string) error {
		_, err := client.Send(ctx, WebhookRequest{URL: url, Method: http.MethodPost, Body: []byte(`{}`), MsgID: "m", Secret: secret})
		return err
	}
	for _, url := range []string{
		victim.URL,
		"http://127.0.0.1:" + victimPort + "/",
		"http://[::1]:" + victimPort + "/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/",
		"http://internal.example.com/hook",
		"http://mixed.example.com/hook",
		"http://loopback.example.com:" + victimPort + "/",
		"http://0.0.0.0:" + victimPort + "/",
		"http://[::ffff:127.0.0.1]:" + victimPort + "/",
		redirector.URL + "/?to=" + victim.URL,
		redirector.URL + "/?to=http://169.254.169.254/latest/meta-data/",
		redirector.URL + "/?to=http://internal.example.com/",
		redirector.URL + "/?to=http://[::1]:" + victimPort + "/",
	} {
		if err := send(url); !errors.Is(err, jobs.ErrBlockedTarget) {
			t.Errorf("%s: %v, want refused", url, err)
		}
	}
	if n := len(victim.requests()); n != 0 {
		t.Fatalf("the guarded server received %d requests", n)
	}
	if n := len(redirector.requests()); n != 4 {
		t.Fatalf("the redirector received %d requests, want 4", n)
	}

	t.Run("the dialer control refuses at connect time", func(t *testing.T) {
		t.Parallel()
		for _, addr := range []string{"10.0.0.1:80", "127.0.0.1:443", "[::1]:80", "169.254.169.254:80", "100.64.1.1:80", "[fe80::1]:80"} {
			if err := client.control("tcp", addr, nil); !errors.Is(err, jobs.ErrBlockedTarget) {
				t.Errorf("control(%s) = %v", addr, err)
			}
		}
		if err := client.control("tcp", "93.184.216.34:443", nil); err != nil {
			t.Errorf("control(public) = %v", err)
		}
	})
	t.Run("allowed when configured, except metadata", func(t *testing.T) {
		t.Parallel()
		open := NewWebhookClient(WebhookOptions{AllowPrivate: true, LookupIP: resolver})
		if _, err := open.Send(ctx, WebhookRequest{URL: victim.URL + "/ok", Method: http.MethodPost, MsgID: "m", Secret: secret}); err != nil {
			t.Fatalf("private target with allow-private: %v", err)
		}
		_, err := open.Send(ctx, WebhookRequest{URL: "http://169.254.169.254/", Method: http.MethodGet, MsgID: "m", Secret: secret})
		if !errors.Is(err, jobs.ErrBlockedTarget) {
			t.Fatalf("metadata with allow-private: %v", err)
		}
	})
}

func TestReadExcerpt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", ExcerptLimit) // 2 bytes each: the limit falls on a rune boundary
	got := excerpt([]byte("x" + long))
	if len(got) > ExcerptLimit || !strings.HasPrefix(got, "xéé") || strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("excerpt of %d bytes ends %q", len(got), got[len(got)-4:])
	}
	got = excerpt([]byte("a\x00b\xffc"))
	if got != "ab\uFFFDc" {
		t.Fatalf("excerpt %q", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"-3":                            0,
		"86400":                         time.Hour,
		"Wed, 01 May 2024 12:00:30 GMT": 30 * time.Second,
		"soon":                          0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestRedirectDropsCustomHeadersOnAnotherHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	other := newHookServer(t, func(int, http.ResponseWriter, *http.Request) {})
	first := newHookServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
		}
	})
	client := NewWebhookClient(WebhookOptions{AllowPrivate: true})
	send := func(url string) {
		t.Helper()
		_, err := client.Send(ctx, WebhookRequest{
			URL: url, Method: http.MethodPost, Body: []byte(`{}`), MsgID: "m", Secret: jobs.NewSigningSecret(),
			Headers: map[string]string{"X-Api-Key": "secret-key", "Authorization": "Bearer t"},
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// Same host and port: the task's headers go along.
	send(first.URL + "/?to=" + first.URL + "/next")
	hits := first.requests()
	if len(hits) != 2 || hits[1].header.Get("X-Api-Key") != "secret-key" {
		t.Fatalf("same-host redirect: %d requests, second headers %v", len(hits), hits[len(hits)-1].header)
	}
	// Another port of the same address is another host: they do not.
	send(first.URL + "/?to=" + other.URL + "/hook")
	hits = other.requests()
	if len(hits) != 1 {
		t.Fatalf("the other server got %d requests", len(hits))
	}
	h := hits[0].header
	if h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" {
		t.Fatalf("custom headers crossed to another host: %v", h)
	}
	if h.Get("webhook-signature") == "" || h.Get("webhook-id") != "m" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("the signature headers must still be sent: %v", h)
	}
}

func TestOutput(t *testing.T) {
	t.Parallel()
	big := `{"rows":"` + strings.Repeat("é", 40) + `"}`
	for _, c := range []struct {
		name, body, contentType string
		max                     int
		want                    string
		truncated               bool
	}{
		{"json kept whole", `{"id":7}`, "application/json", 100, `{"id":7}`, false},
		{"json without a content type", `[1,2]`, "", 100, `[1,2]`, false},
		{"not json", `ok`, "text/plain", 100, ``, false},
		{"json jsonb refuses", `{"a":"\u0000"}`, "application/json", 100, ``, false},
		{"larger json cut to a string on a rune", big, "application/problem+json; charset=utf-8", 20, `"{\"rows\":\"ééééé"`, true},
		{"larger, not declared json", big, "text/plain", 20, ``, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(c.body)
			got, truncated := output(body[:min(len(body), c.max+1)], c.max, c.contentType)
			if string(got) != c.want || truncated != c.truncated {
				t.Fatalf("output = %s, %v; want %s, %v", got, truncated, c.want, c.truncated)
			}
		})
	}
}
