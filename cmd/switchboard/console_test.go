package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/infra/browsertest"
	"github.com/switchboard/switchboard/infra/dbtest"
)

// The console in headless Chromium against real replicas on a real
// database. Every page may talk only to its replica: a request to any other
// host is refused and fails the test. The screenshots in docs/screenshots
// are written by these tests.

const mobileWidth = 375

// screenshot saves the whole page as docs/screenshots/<name>.png.
func screenshot(t *testing.T, page *browsertest.Page, name string) {
	t.Helper()
	png, err := chromedp.Run(page.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// viewport resizes the page (desktop 1280×800, or 375 px wide).
func viewport(t *testing.T, page *browsertest.Page, width int) {
	t.Helper()
	height := int64(800)
	if width == mobileWidth {
		height = 812
	}
	page.Do(t, "resize", chromedp.EmulateViewport(int64(width), height))
}

// signIn fills the console's sign-in form; register creates the account.
func signIn(t *testing.T, page *browsertest.Page, base, email string, register bool) {
	t.Helper()
	button := "signin"
	if register {
		button = "register"
	}
	page.Do(t, "sign in as "+email,
		chromedp.Navigate(base+"/console"),
		chromedp.WaitVisible(chromedp.ID("signin")),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "correct horse"),
		chromedp.Click(chromedp.ID(button)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state=live]`)),
	)
}

func text(t *testing.T, page *browsertest.Page, css string) string {
	t.Helper()
	return browsertest.Eval[string](t, page, fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, css))
}

func TestConsoleUser(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.WebhookPrivate = true
	srv := startServer(t, cfg)
	page := browsertest.NewPage(t, browsertest.Options{Origin: srv.URL})

	signIn(t, page, srv.URL, "newcomer@example.com", true)
	page.Do(t, "see the empty state", chromedp.WaitVisible(chromedp.ID("create-first")))
	screenshot(t, page, "console-empty")

	t.Log("a bad cron string shows the API's detail")
	page.Do(t, "create a task with a bad schedule",
		chromedp.Click(chromedp.ID("create-first")),
		chromedp.WaitVisible(chromedp.CSS(`form.form input[name=name]`)),
		chromedp.SendKeys(chromedp.CSS(`form.form input[name=name]`), "nightly report"),
		chromedp.SendKeys(chromedp.CSS(`form.form input[name=schedule]`), "every tuesday"),
		chromedp.SendKeys(chromedp.CSS(`form.form input[name=url]`), hook.URL+"/report"),
		chromedp.Click(chromedp.CSS(`form.form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.form .error`)),
	)
	if got := text(t, page, `form.form .error`); !strings.Contains(got, `schedule "every tuesday" is not valid`) {
		t.Fatalf("the error shown for a bad cron string: %q", got)
	}

	t.Log("create it, see its signing secret once")
	page.Do(t, "fix the schedule and create",
		chromedp.SetValue(chromedp.CSS(`form.form input[name=schedule]`), "@every 1h"),
		chromedp.Click(chromedp.CSS(`form.form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.secret`)),
	)
	if secret := text(t, page, `.secret`); !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("signing secret shown: %q", secret)
	}
	page.Do(t, "see the task listed", chromedp.WaitVisible(chromedp.CSS(`tr[data-task-id] a`)))
	screenshot(t, page, "console-tasks")

	t.Log("trigger it: the run appears and finishes without a reload")
	page.Do(t, "open the task", chromedp.Click(chromedp.CSS(`tr[data-task-id] a`)), chromedp.WaitVisible(chromedp.ID("run-now")))
	browsertest.Eval[bool](t, page, `window.notReloaded = true`)
	page.Do(t, "run it now and see it succeed",
		chromedp.Click(chromedp.ID("run-now")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run-id]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-status=succeeded]`)),
	)
	if !browsertest.Eval[bool](t, page, `window.notReloaded === true`) {
		t.Fatal("the page reloaded")
	}
	if code := text(t, page, `tr[data-status=succeeded] td[data-label=HTTP]`); code != "200" {
		t.Fatalf("HTTP status shown: %q", code)
	}
	screenshot(t, page, "console-runs")
	viewport(t, page, mobileWidth)
	screenshot(t, page, "console-runs-375")
	if w := browsertest.Eval[int](t, page, `document.documentElement.scrollWidth`); w > mobileWidth {
		t.Errorf("at %d px the page is %d px wide: it scrolls sideways", mobileWidth, w)
	}
	viewport(t, page, 1280)

	t.Run("cancel a delayed run", func(t *testing.T) {
		// Needs on-demand runs (run_at, POST /v1/runs/{id}/cancel).
		caps := browsertest.Eval[map[string]bool](t, page, `import('/console/assets/api.js').then((m) => m.capabilities())`)
		if !caps["cancel"] || !caps["triggerRunAt"] {
			t.Skip("this server's API has no delayed runs or cancel yet")
		}
		page.Do(t, "run it in an hour, then cancel it",
			chromedp.SetValue(chromedp.CSS(`form.trigger input[name=run_at]`), time.Now().Add(time.Hour).Format("2006-01-02T15:04:05")),
			chromedp.Click(chromedp.ID("run-now")),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-status=queued] button.cancel`)),
			chromedp.Click(chromedp.CSS(`tr[data-status=queued] button.cancel`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-status=cancelled]`)),
		)
	})
}

func TestConsoleAdminCluster(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	procs := []*process{startProcess(t, dbURL), startProcess(t, dbURL), startProcess(t, dbURL)}
	registerUserAt(t, procs[0].URL, "operator@example.com")
	var out strings.Builder
	cfg := testConfig(t, dbURL)
	if err := adminCommand(context.Background(), cfg, dbtest.Logger(t), []string{"grant", "operator@example.com"}, &out); err != nil {
		t.Fatalf("admin grant: %v", err)
	}
	ids := make([]string, len(procs))
	for i, p := range procs {
		ids[i] = p.nodeID(t, dbURL)
	}
	page := browsertest.NewPage(t, browsertest.Options{Origin: procs[0].URL})
	signIn(t, page, procs[0].URL, "operator@example.com", false)

	row := func(id, attrs string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-node-id=%q]%s`, id, attrs)))
	}
	page.Do(t, "see three reachable nodes", chromedp.Navigate(procs[0].URL+"/console#/cluster"),
		row(ids[0], `[data-reachable=true]`), row(ids[1], `[data-reachable=true]`), row(ids[2], `[data-reachable=true]`))
	if n := browsertest.Eval[int](t, page, `document.querySelectorAll('tr[data-node-id]').length`); n != 3 {
		t.Fatalf("%d nodes shown, want 3", n)
	}

	t.Log("drain shows the node that acked")
	page.Do(t, "drain the second node",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-node-id=%q] button.drain`, ids[1]))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-drained=%q] .acked`, ids[1]))),
		row(ids[1], `[data-draining=true]`),
	)
	screenshot(t, page, "console-cluster")

	t.Log("kill -9 the third: the page shows it unreachable")
	if err := procs[2].Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	page.Do(t, "see the killed node unreachable", row(ids[2], `[data-reachable=false]`))
	t.Logf("the killed node showed as unreachable %s after kill -9", time.Since(killed).Round(100*time.Millisecond))

	t.Log("disconnect a user: the page shows which nodes acked and which failed")
	page.Do(t, "disconnect the operator's own sockets",
		chromedp.SendKeys(chromedp.CSS(`input[name=disconnect-email]`), "operator@example.com"),
		chromedp.Click(chromedp.CSS(`form[aria-labelledby=disc-title] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[aria-labelledby=disc-title] .outcome`)),
	)
	acked := browsertest.Eval[[]string](t, page, `[...document.querySelectorAll('form[aria-labelledby=disc-title] code.acked')].map((e) => e.textContent)`)
	failed := browsertest.Eval[[]string](t, page, `[...document.querySelectorAll('form[aria-labelledby=disc-title] code.failed')].map((e) => e.textContent)`)
	if len(acked) != 2 || len(failed) != 1 || failed[0] != ids[2][:8] {
		t.Fatalf("disconnect shows acked %v, failed %v; want the two live nodes and %s", acked, failed, ids[2][:8])
	}
	page.Do(t, "the console reconnects its own socket", chromedp.WaitVisible(chromedp.CSS(`#live[data-state=live]`)))

	page.Do(t, "presence of a room, with the missing node named",
		chromedp.SendKeys(chromedp.CSS(`input[name=room]`), "lobby"),
		chromedp.Click(chromedp.CSS(`form[aria-labelledby=pres-title] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[aria-labelledby=pres-title] .warn`)),
	)
	if got := text(t, page, `form[aria-labelledby=pres-title] .warn`); !strings.Contains(got, ids[2]) {
		t.Fatalf("presence does not name the unreachable node: %q", got)
	}

	viewport(t, page, mobileWidth)
	screenshot(t, page, "console-cluster-375")
	if w := browsertest.Eval[int](t, page, `document.documentElement.scrollWidth`); w > mobileWidth {
		t.Errorf("at %d px the page is %d px wide: it scrolls sideways", mobileWidth, w)
	}
}
