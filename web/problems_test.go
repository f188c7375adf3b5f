package web

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// unknownKeys is a body with the given fields plus n unexpected properties.
func unknownKeys(fields string, n int) []byte {
	var b bytes.Buffer
	b.WriteString("{" + fields)
	for i := range n {
		if i > 0 || fields != "" {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteByte('}')
	return b.Bytes()
}

const validTaskFields = `"name":"n","schedule":"@hourly","action":{"type":"publish","event":"e"}`

// maxProblemBytes bounds any problem answer: 21 errors of at most
// maxLocation+maxMessage+maxEchoedValue bytes, plus the envelope.
const maxProblemBytes = (maxErrorDetails+1)*(maxLocation+maxMessage+maxEchoedValue+64) + maxDetail + 256

func TestValidationErrorsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "bounded@example.com")

	t.Run("unknown keys on a task: the answer does not grow with the body", func(t *testing.T) {
		t.Parallel()
		var sizes []int
		for _, n := range []int{100, 1000} {
			res := b.do(t, http.MethodPost, "/v1/tasks", unknownKeys(validTaskFields, n), token)
			requireProblem(t, res, http.StatusUnprocessableEntity)
			errs := res.body["errors"].([]any)
			last := errs[len(errs)-1].(map[string]any)["message"]
			if len(errs) != maxErrorDetails+1 || last != fmt.Sprintf("and %d more errors", n-maxErrorDetails) {
				t.Fatalf("%d keys: %d errors, last %v", n, len(errs), last)
			}
			for _, e := range errs {
				if v, ok := e.(map[string]any)["value"]; ok {
					t.Fatalf("%d keys: an error echoes a value: %v", n, v)
				}
			}
			if len(res.raw) > maxProblemBytes {
				t.Fatalf("%d keys: a %d-byte answer, bound %d", n, len(res.raw), maxProblemBytes)
			}
			sizes = append(sizes, len(res.raw))
		}
		if sizes[1] > sizes[0]+64 { // only the digits of "and N more" differ
			t.Fatalf("answer sizes grow with the key count: %v", sizes)
		}
	})
	t.Run("task bodies over 256 KiB: 413", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks", unknownKeys(validTaskFields, 30000), token), http.StatusRequestEntityTooLarge)
	})
	t.Run("a few errors are all listed", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodPost, "/v1/tasks", unknownKeys(validTaskFields, 3), token)
		requireProblem(t, res, http.StatusUnprocessableEntity)
		if errs := res.body["errors"].([]any); len(errs) != 3 {
			t.Fatalf("%d errors, want 3: %s", len(errs), res.raw)
		}
	})
	t.Run("long values are cut, short ones echoed", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("é", 100)
		res := b.do(t, http.MethodPost, "/v1/tasks", fmt.Sprintf(`{"name":"n","schedule":"@hourly","overlap":%q,"action":{"type":"publish","event":"e"}}`, long), token)
		requireProblem(t, res, http.StatusUnprocessableEntity)
		v := res.body["errors"].([]any)[0].(map[string]any)["value"].(string)
		if len(v) > maxEchoedValue+len("…") || !strings.HasSuffix(v, "…") || !strings.HasPrefix(long, strings.TrimSuffix(v, "…")) {
			t.Fatalf("echoed value %q", v)
		}
		res = b.do(t, http.MethodPost, "/v1/tasks", `{"name":"n","schedule":"@hourly","overlap":"sometimes","action":{"type":"publish","event":"e"}}`, token)
		if v := res.body["errors"].([]any)[0].(map[string]any)["value"]; v != "sometimes" {
			t.Fatalf("short value echoed as %v", v)
		}
	})
	t.Run("auth bodies over 4 KiB: 413 before any parsing", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/v1/auth/login", "/v1/auth/register"} {
			requireProblem(t, b.do(t, http.MethodPost, path, unknownKeys(`"email":"a@example.com","password":"correct horse"`, 500), ""), http.StatusRequestEntityTooLarge)
			res := b.do(t, http.MethodPost, path, unknownKeys(`"email":"a@example.com","password":"correct horse"`, 200), "")
			requireProblem(t, res, http.StatusUnprocessableEntity)
			if len(res.raw) > maxProblemBytes || len(res.body["errors"].([]any)) != maxErrorDetails+1 {
				t.Fatalf("%s: %d bytes, %d errors", path, len(res.raw), len(res.body["errors"].([]any)))
			}
		}
	})
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456789…"},
		{"ééééé", 3, "é…"}, // never half a rune
		{"", 0, ""},
	} {
		if got := truncate(tc.in, tc.n); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// BenchmarkValidationErrors shows the cost of a request with n unknown
// keys: bytes and allocations per request grow linearly with n (parsing),
// the answer stays the same size.
func BenchmarkValidationErrors(b *testing.B) {
	bundle := setup(b)
	token, _ := bundle.register(b, "bench-bounded@example.com")
	for _, n := range []int{100, 1000, 10000} {
		body := unknownKeys(validTaskFields, n)
		b.Run(fmt.Sprintf("task_keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				res := bundle.do(b, http.MethodPost, "/v1/tasks", body, token)
				if res.status != http.StatusUnprocessableEntity {
					b.Fatalf("status %d", res.status)
				}
				size = len(res.raw)
			}
			b.ReportMetric(float64(size), "resp_bytes")
			b.ReportMetric(float64(len(body)), "req_bytes")
		})
	}
	// No account needed here: the body is refused at 4 KiB, unparsed.
	login := unknownKeys(`"email":"a@example.com","password":"correct horse"`, 5000)
	b.Run("login_keys=5000", func(b *testing.B) {
		b.ReportAllocs()
		var size int
		for b.Loop() {
			res := bundle.do(b, http.MethodPost, "/v1/auth/login", login, "")
			if res.status != http.StatusRequestEntityTooLarge {
				b.Fatalf("status %d", res.status)
			}
			size = len(res.raw)
		}
		b.ReportMetric(float64(size), "resp_bytes")
		b.ReportMetric(float64(len(login)), "req_bytes")
	})
}

// TestUnstorableTextIs422: text Postgres refuses (NUL, lone surrogates in
// jsonb) is bad input, not a server error, and stores nothing.
func TestUnstorableTextIs422(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "nul@example.com")
	id := b.createTask(t, token, webhookTask("keep"))["id"].(string)
	publish := func(payload string) string {
		return `{"name":"p","schedule":"@hourly","action":{"type":"publish","event":"e","payload":` + payload + `}}`
	}
	hook := func(field string) string {
		return `{"name":"w","schedule":"@hourly","action":{"type":"webhook","url":"https://example.com/h",` + field + `}}`
	}
	for name, body := range map[string]string{
		"NUL in name":                 `{"name":"a\u0000b","schedule":"@hourly","action":{"type":"publish","event":"e"}}`,
		"NUL in a payload string":     publish(`{"s":"a\u0000b"}`),
		"NUL in a payload key":        publish(`{"\u0000":1}`),
		"lone surrogate in a payload": publish(`"\ud800"`),
		"lone low surrogate":          publish(`["\udc00"]`),
		"NUL in a webhook body":       hook(`"body":{"s":"\u0000"}`),
		"lone surrogate in a body":    hook(`"body":"\ud800"`),
		"NUL in a header value":       hook(`"headers":{"X-A":"\u0000"}`),
		"NUL in a header name":        hook(`"headers":{"X-\u0000":"v"}`),
		"NUL in the event":            `{"name":"p","schedule":"@hourly","action":{"type":"publish","event":"e\u0000"}}`,
		"NUL in the room":             `{"name":"p","schedule":"@hourly","action":{"type":"publish","event":"e","room":"r\u0000"}}`,
		"NUL in the schedule":         `{"name":"p","schedule":"@hourly\u0000","action":{"type":"publish","event":"e"}}`,
		"NUL in the timezone":         `{"name":"p","schedule":"@hourly","timezone":"UTC\u0000","action":{"type":"publish","event":"e"}}`,
	} {
		t.Run("create: "+name, func(t *testing.T) {
			t.Parallel()
			requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks", body, token), http.StatusUnprocessableEntity)
		})
	}
	for name, body := range map[string]string{
		"NUL in name":                 `{"name":"a\u0000b"}`,
		"lone surrogate in a payload": `{"action":{"type":"publish","event":"e","payload":"\ud800"}}`,
	} {
		t.Run("patch: "+name, func(t *testing.T) {
			t.Parallel()
			requireProblem(t, b.do(t, http.MethodPatch, "/v1/tasks/"+id, body, token), http.StatusUnprocessableEntity)
		})
	}
	for _, path := range []string{"/v1/auth/login", "/v1/auth/register"} {
		t.Run("NUL in the email on "+path, func(t *testing.T) {
			t.Parallel()
			res := b.do(t, http.MethodPost, path, `{"email":"a\u0000@example.com","password":"correct horse"}`, "")
			if res.status < 400 || res.status >= 500 {
				t.Fatalf("%s: %d %s", path, res.status, res.raw)
			}
		})
	}
	// Cleanup runs once every parallel subtest above has finished.
	t.Cleanup(func() {
		items := b.do(t, http.MethodGet, "/v1/tasks", nil, token).body["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["name"] != "keep" {
			t.Errorf("refused requests changed the tasks: %v", items)
		}
	})
}

func TestUnknownRoutesAnswerProblems(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireProblem(t, b.do(t, http.MethodGet, "/v1/nope", nil, ""), http.StatusNotFound)
	res := b.do(t, http.MethodPut, "/v1/tasks", "{}", "")
	requireProblem(t, res, http.StatusMethodNotAllowed)
	if allow := res.header.Get("Allow"); allow != "GET, POST" {
		t.Fatalf("Allow: %q", allow)
	}
}
