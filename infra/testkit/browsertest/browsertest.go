// Package browsertest runs one headless Chromium per test binary for browser
// tests driven by chromedp, and watches every request a page makes: a page
// may only talk to its own origin, and any request elsewhere is refused and
// recorded so the test can fail on it.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// RequireEnv, set to any value (CI sets it), makes a missing browser a
// failure instead of a skip.
const RequireEnv = "SWITCHBOARD_BROWSER_TESTS"

// Chromium is the browser binary: $CHROMIUM, else the first of the usual
// names on PATH; "" when there is none.
func Chromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

var shared struct {
	once    sync.Once
	ctx     context.Context // the browser's
	cancels []context.CancelFunc
	dir     string
	err     error
}

// browser starts the shared Chromium on first use.
func browser(t testing.TB) context.Context {
	t.Helper()
	path := Chromium()
	if path == "" {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("%s is set but no Chromium was found (install Debian's chromium, or set CHROMIUM)", RequireEnv)
		}
		t.Skip("no Chromium installed (apt-get install chromium); set " + RequireEnv + " to make this a failure")
	}
	shared.once.Do(func() { shared.err = start(path) })
	if shared.err != nil {
		t.Fatalf("start Chromium: %v", shared.err)
	}
	return shared.ctx
}

func start(path string) error {
	dir, err := os.MkdirTemp("", "switchboard-chromium-")
	if err != nil {
		return err
	}
	shared.dir = dir
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.UserDataDir(dir),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true), chromedp.Flag("metrics-recording-only", true),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	shared.ctx, shared.cancels = bctx, []context.CancelFunc{bcancel, acancel}
	if err := chromedp.Do(bctx); err != nil {
		Close()
		return err
	}
	return nil
}

// Close stops the shared browser; TestMain calls it after the tests.
func Close() {
	for _, c := range shared.cancels {
		c()
	}
	shared.cancels = nil
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
}

// Origin is scheme://host[:port] of a URL.
func Origin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme == "" || u.Host == "" {
		return "", errors.New("no scheme or host in " + raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

func mustOrigin(t testing.TB, raw string) string {
	t.Helper()
	o, err := Origin(raw)
	if err != nil {
		t.Fatal(fmt.Errorf("browsertest: %w", err))
	}
	return o
}
