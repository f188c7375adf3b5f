package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/cmd/internal/replica"
	"github.com/switchboard/switchboard/infra/testkit/browsertest"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// The console in headless Chromium against real replicas on a real
// database. Every page may talk only to its replica: a request to any other
// host is refused and fails the test. The screenshots in docs/screenshots
// are taken by these tests every run and written there when
// SWITCHBOARD_UPDATE_SCREENSHOTS=1 (so an ordinary test run leaves the
// working tree as it was):
//
//	SWITCHBOARD_UPDATE_SCREENSHOTS=1 go test ./cmd/switchboard/ -run Console

const mobileWidth = 375

// screenshot takes the whole page and, when asked, saves it as
// docs/screenshots/<name>.png.
func screenshot(t *testing.T, page *browsertest.Page, name string) {
	t.Helper()
	png, err := chromedp.Run(page.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) == 0 {
		t.Fatalf("screenshot %s is empty", name)
	}
	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOTS") != "1" {
		return
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
	submit := chromedp.Click(chromedp.ID("register"))
	if !register {
		// With the keyboard only: Enter in the password field signs in.
		submit = chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "\r")
	}
	page.Do(t, "sign in as "+email,
		chromedp.Navigate(base+"/console"),
		chromedp.WaitVisible(chromedp.ID("signin")),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "correct horse"),
		submit,
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state=live]`)),
	)
}

// requireLabelled fails the test when a control on the page has no
// accessible name: a form control without a label, a button or link
// without text.
func requireLabelled(t *testing.T, page *browsertest.Page) {
	t.Helper()
	unnamed := browsertest.Eval[[]string](t, page, `[...document.querySelectorAll('input, select, textarea, button, a')]
		.filter((e) => e.offsetParent !== null)
		.filter((e) => (e.matches('input, select, textarea') ? !(e.labels && e.labels.length) : !e.textContent.trim()) && !e.getAttribute('aria-label'))
		.map((e) => e.outerHTML.slice(0, 120))`)
	if len(unnamed) > 0 {
		t.Errorf("controls without an accessible name: %v", unnamed)
	}
}

// pressButton activates the button with that text, as Enter on it would
// (a mouse click lands wherever the button is when it arrives; live rows
// can move the page under it).
func pressButton(t *testing.T, page *browsertest.Page, label string) {
	t.Helper()
	found := browsertest.Eval[bool](t, page, fmt.Sprintf(`(() => { const b = [...document.querySelectorAll('button')].find((b) => b.textContent === %q && b.offsetParent !== null); if (b) { b.focus(); b.click(); } return !!b })()`, label))
	if !found {
		t.Fatalf("no button %q on the page", label)
	}
}

// setValue sets a form control's value as typing would.
func setValue(t *testing.T, page *browsertest.Page, css, value string) {
	t.Helper()
	browsertest.Eval[bool](t, page, fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = %q; el.dispatchEvent(new Event('input', {bubbles: true})); return true })()`, css, value))
}

func text(t *testing.T, page *browsertest.Page, css string) string {
	t.Helper()
	return browsertest.Eval[string](t, page, fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, css))
}

func TestConsoleUser(t *testing.T) {
	t.Parallel()
	var lastBody atomic.Value
	lastBody.Store("")
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		lastBody.Store(string(b))
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.WebhookPrivate = true
	srv := startServer(t, cfg)
	// The first list of a task's runs comes late, after the run's live
	// events: the page must not let the older answer undo them.
	var held atomic.Bool
	release := make(chan struct{})
	page := browsertest.NewPage(t, browsertest.Options{Origin: srv.URL, Hold: func(method, url string) <-chan struct{} {
		if method == http.MethodGet && strings.Contains(url, "/runs?limit=50") && held.CompareAndSwap(false, true) {
			return release
		}
		return nil
	}})

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
	requireLabelled(t, page)
	if got := text(t, page, `form.form .error`); !strings.Contains(got, `schedule "every tuesday" is not valid`) {
		t.Fatalf("the error shown for a bad cron string: %q", got)
	}

	t.Log("create it, see its signing secret once")
	setValue(t, page, `form.form input[name=schedule]`, "@every 1h")
	page.Do(t, "fix the schedule and create",
		chromedp.Click(chromedp.CSS(`form.form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.secret`)),
	)
	firstSecret := text(t, page, `.secret`)
	if !strings.HasPrefix(firstSecret, "whsec_") {
		t.Fatalf("signing secret shown: %q", firstSecret)
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
	close(release) // the list of runs, answered before the run, arrives now
	page.Do(t, "the late list of runs is in", chromedp.WaitVisible(chromedp.CSS(`table.runs[aria-busy=false]`)))
	if !browsertest.Eval[bool](t, page, `document.querySelector('tr[data-status=succeeded]') !== null`) {
		t.Fatal("the list of runs answered before the run undid its live events: the run is gone from the page")
	}
	if code := text(t, page, `tr[data-status=succeeded] td[data-label=HTTP]`); code != "200" {
		t.Fatalf("HTTP status shown: %q", code)
	}

	// On-demand runs: what the console offers follows the served OpenAPI
	// document, so these run once the API has them. They share the page, in
	// order.
	caps := browsertest.Eval[map[string]bool](t, page, `import('/console/assets/api.js').then((m) => m.capabilities())`)
	t.Run("attempts of a run", func(t *testing.T) {
		if !caps["attempts"] {
			t.Skip("this server's API lists no attempts yet")
		}
		page.Do(t, "open the attempts of the run",
			chromedp.Click(chromedp.CSS(`tr[data-status=succeeded] button.attempts`)),
			chromedp.WaitVisible(chromedp.CSS(`tr.attempts li`)),
		)
		if got := text(t, page, `tr.attempts li`); !strings.Contains(got, "succeeded") || !strings.Contains(got, "HTTP 200") {
			t.Fatalf("attempt shown: %q", got)
		}
	})
	t.Run("trigger with a payload", func(t *testing.T) {
		if !caps["triggerPayload"] {
			t.Skip("this server's API takes no trigger payload yet")
		}
		page.Do(t, "run it with a payload",
			chromedp.SendKeys(chromedp.CSS(`form.trigger textarea[name=payload]`), `{"order": 42}`),
			chromedp.Click(chromedp.ID("run-now")),
		)
		testwait.For(t, 30*time.Second, "the webhook to get the payload", func() bool {
			var got map[string]any
			return json.Unmarshal([]byte(lastBody.Load().(string)), &got) == nil && got["order"] == 42.0
		})
		page.Do(t, "see both runs succeed", chromedp.WaitVisible(chromedp.CSS(`tr[data-status=succeeded]:nth-child(2)`)))
		setValue(t, page, `form.trigger textarea[name=payload]`, "")
	})
	t.Run("cancel a delayed run, then retry it", func(t *testing.T) {
		if !caps["cancel"] || !caps["triggerRunAt"] {
			t.Skip("this server's API has no delayed runs or cancel yet")
		}
		setValue(t, page, `form.trigger input[name=run_at]`, time.Now().Add(time.Hour).Format("2006-01-02T15:04:05"))
		page.Do(t, "run it in an hour, then cancel it",
			chromedp.Click(chromedp.ID("run-now")),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-status=queued] button.cancel`)),
			chromedp.Click(chromedp.CSS(`tr[data-status=queued] button.cancel`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-status=cancelled]`)),
		)
		if !caps["retry"] {
			return
		}
		before := browsertest.Eval[int](t, page, `document.querySelectorAll('tr[data-run-id]').length`)
		page.Do(t, "retry the cancelled run", chromedp.Click(chromedp.CSS(`tr[data-status=cancelled] button.retry`)))
		if _, err := chromedp.Run(page.Ctx, chromedp.PollFunction[bool](fmt.Sprintf(`() => document.querySelectorAll('tr[data-run-id]').length > %d`, before))); err != nil {
			t.Fatalf("the retry is not listed: %v", err)
		}
	})

	t.Log("pause, resume and edit it")
	pressButton(t, page, "Pause")
	page.Do(t, "see it paused", chromedp.WaitVisible(chromedp.CSS(`.head .s-paused`)))
	pressButton(t, page, "Resume")
	page.Do(t, "see it active", chromedp.WaitVisible(chromedp.CSS(`.head .s-active`)))
	page.Do(t, "rename it", chromedp.Click(chromedp.ID("edit-task")), chromedp.WaitVisible(chromedp.CSS(`form.form input[name=name]`)))
	setValue(t, page, `form.form input[name=name]`, "weekly report")
	page.Do(t, "save", chromedp.Click(chromedp.CSS(`form.form button[type=submit]`)), chromedp.WaitNotPresent(chromedp.CSS(`form.form`)))
	if got := text(t, page, `.head h1`); got != "weekly report" {
		t.Fatalf("heading after the rename: %q", got)
	}

	t.Log("rotate its signing secret (two steps): a new one shown once, the old one signing 24 h more")
	pressButton(t, page, "Rotate secret")
	pressButton(t, page, "Confirm rotate (old secret kept 24 h)")
	page.Do(t, "see the new secret", chromedp.WaitVisible(chromedp.CSS(`.secret`)), chromedp.WaitVisible(chromedp.CSS(`.old-secret`)))
	if secret := text(t, page, `.secret`); !strings.HasPrefix(secret, "whsec_") || secret == firstSecret {
		t.Fatalf("after a rotation the secret shown is %q (the first was %q)", secret, firstSecret)
	}

	requireLabelled(t, page)
	screenshot(t, page, "console-runs")
	viewport(t, page, mobileWidth)
	screenshot(t, page, "console-runs-375")
	if w := browsertest.Eval[int](t, page, `document.documentElement.scrollWidth`); w > mobileWidth {
		t.Errorf("at %d px the page is %d px wide: it scrolls sideways", mobileWidth, w)
	}
	viewport(t, page, 1280)

	t.Log("delete it (two steps): back to the empty state")
	pressButton(t, page, "Delete")
	pressButton(t, page, "Confirm delete")
	page.Do(t, "see the empty state again", chromedp.WaitVisible(chromedp.ID("create-first")))
}

func TestConsoleAdminCluster(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	procs := []*process{startProcess(t, dbURL), startProcess(t, dbURL), startProcess(t, dbURL)}
	registerUserAt(t, procs[0].URL, "operator@example.com")
	var out strings.Builder
	cfg := testConfig(t, dbURL)
	if err := adminCommand(context.Background(), cfg, dbtest.Logger(t), []string{"grant", "operator@example.com"}, nil, &out); err != nil {
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

	if status := browsertest.Eval[int](t, page, `fetch('/riverui/').then((r) => r.status)`); status != http.StatusOK {
		t.Fatalf("the console's River UI link answers %d: the admin's sign-in set no River UI cookie", status)
	}

	t.Log("the scaling signals: three jobs wait in a queue no worker serves")
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, scheduled_at)
		SELECT '{}', 'console_test', 1, 'unserved', 'available', now() - interval '90 seconds' FROM generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	signal := func(name string) string {
		return fmt.Sprintf(`[data-signal=%q]`, name)
	}
	page.Do(t, "see the worker demand", chromedp.WaitVisible(chromedp.CSS(signal("demand"))))
	if _, err := chromedp.Run(page.Ctx, chromedp.PollFunction[bool](fmt.Sprintf(`() => document.querySelector('%s').textContent === '3' &&
			document.querySelector('%s').textContent.endsWith('ago')`, signal("demand"), signal("oldest-available")))); err != nil {
		t.Fatalf("the console never showed a demand of 3 and the oldest available job's age: %v", err)
	}
	if got := browsertest.Eval[string](t, page, fmt.Sprintf(`document.querySelector('%s').textContent`, signal("notify-queue"))); got != "0.0 %" {
		t.Fatalf("NOTIFY queue used shows %q, want 0.0 %%", got)
	}
	if _, err := conn.Exec(context.Background(), `DELETE FROM river_job WHERE queue = 'unserved'`); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(page.Ctx, chromedp.PollFunction[bool](fmt.Sprintf(`() => document.querySelector('%s').textContent === '0'`, signal("demand")))); err != nil {
		t.Fatalf("the console never showed the demand back at 0: %v", err)
	}

	t.Log("drain shows the node that acked")
	page.Do(t, "drain the second node",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-node-id=%q] button.drain`, ids[1]))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-drained=%q] .acked`, ids[1]))),
		row(ids[1], `[data-draining=true]`),
	)
	requireLabelled(t, page)
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

	page.Do(t, "presence of a room nobody is in",
		chromedp.SendKeys(chromedp.CSS(`input[name=room]`), "lobby"),
		chromedp.Click(chromedp.CSS(`form[aria-labelledby=pres-title] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[aria-labelledby=pres-title] .result p`)),
	)
	if got := text(t, page, `form[aria-labelledby=pres-title] .result`); !strings.Contains(got, "Nobody is in lobby.") {
		t.Fatalf("presence of an empty room: %q", got)
	}

	viewport(t, page, mobileWidth)
	screenshot(t, page, "console-cluster-375")
	if w := browsertest.Eval[int](t, page, `document.documentElement.scrollWidth`); w > mobileWidth {
		t.Errorf("at %d px the page is %d px wide: it scrolls sideways", mobileWidth, w)
	}
}

func TestBannerNamesTheConsole(t *testing.T) {
	t.Parallel()
	var logs replica.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := newApp(context.Background(), testConfig(t, dbtest.NewDatabaseURL(t)), logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		a.Stop()
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	a.logBanner(&logs)
	port := a.listener.Addr().(*net.TCPAddr).Port
	if want := fmt.Sprintf("console=http://localhost:%d/console", port); !strings.Contains(logs.String(), want) {
		t.Fatalf("the banner does not name the console (%s):\n%s", want, logs.String())
	}
	if !strings.Contains(logs.String(), "registration=open") {
		t.Fatalf("the banner does not say who may register:\n%s", logs.String())
	}
}
