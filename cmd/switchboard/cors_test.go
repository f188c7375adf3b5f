package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// corsPage calls the API from the browser: a POST with the headers a client
// sends (a preflight first), resolved with "<status> <task name>" or the
// error fetch rejects with.
const corsPage = `<!doctype html><title>cors</title><script>
async function callAPI(api, token) {
  try {
    const res = await fetch(api + "/v1/tasks", {method: "POST", headers: {
      "Authorization": "Bearer " + token, "Content-Type": "application/json",
      "Idempotency-Key": crypto.randomUUID()},
      body: JSON.stringify({name: "from " + location.origin, schedule: "@daily", action: {type: "publish", event: "tick"}})});
    const body = await res.json();
    return res.status + " " + body.name;
  } catch (e) {
    return "error: " + e;
  }
}
</script>`

// browser starts headless Chromium with a fresh profile, or skips.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium; .ci/run installs it): skipping the browser CORS test")
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()))
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, for as long as ctx lives
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// TestCORSFromABrowser: a page on a listed origin calls the API; the same
// page on another origin cannot (the browser refuses the preflight's answer).
func TestCORSFromABrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	page := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(corsPage))
	})
	listed, unlisted := httptest.NewServer(page), httptest.NewServer(page)
	t.Cleanup(listed.Close)
	t.Cleanup(unlisted.Close)

	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.AllowedOrigins = []string{listed.URL}
	srv := startServer(t, cfg)
	token, _ := registerUser(t, srv, "browser@example.com")

	call := func(origin string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(cctx, chromedp.Navigate(origin)); err != nil {
			t.Fatalf("browser on %s: %v", origin, err)
		}
		out, err := chromedp.Run(cctx, chromedp.Evaluate[string](`callAPI(`+jsString(srv.URL)+`, `+jsString(token)+`)`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("browser on %s: %v", origin, err)
		}
		return out
	}
	if got := call(listed.URL); got != "201 from "+listed.URL {
		t.Fatalf("listed origin %s: %q, want 201", listed.URL, got)
	}
	if got := call(unlisted.URL); !strings.HasPrefix(got, "error: TypeError") {
		t.Fatalf("unlisted origin %s: %q, want fetch to fail", unlisted.URL, got)
	}
	status, body := listTasks(t, srv, token)
	if status != http.StatusOK || len(body) != 1 {
		t.Fatalf("tasks after the two calls: %d %v, want only the listed origin's", status, body)
	}
}

func listTasks(t *testing.T, srv *testServer, token string) (int, []any) {
	t.Helper()
	status, body := call(t, http.MethodGet, srv.URL+"/v1/tasks", nil, token)
	items, _ := body["items"].([]any)
	return status, items
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
