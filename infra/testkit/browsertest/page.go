package browsertest

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Options of a page.
type Options struct {
	// Origin the page may talk to (scheme://host:port, or any URL on it);
	// required. Requests to anything else are failed and recorded.
	Origin string
	// Width and Height of the viewport; default 1280×800.
	Width, Height int
	// Hold, when set, holds back each response it answers a channel for
	// until that channel closes: the server has answered, the page sees
	// the answer late (to test races between an answer and live events).
	Hold func(method, url string) <-chan struct{}
	// Timeout of everything the page does; default 5 min (a page of the
	// console or the docs under -race on a loaded machine takes minutes).
	Timeout time.Duration
}

// Page is one tab of the shared browser, in a browser context of its own.
type Page struct {
	// Ctx runs chromedp actions in this tab.
	Ctx    context.Context
	origin string
	hold   func(method, url string) <-chan struct{}

	mu       sync.Mutex
	requests []string
	foreign  []string
	errors   []string
}

// NewPage opens a tab that may only reach opts.Origin. It closes when the
// test ends; a test that made a request to another host fails then, and a
// failed test logs the page's requests and script errors.
func NewPage(t *testing.T, opts Options) *Page {
	t.Helper()
	bctx := browser(t)
	p := &Page{origin: mustOrigin(t, opts.Origin), hold: opts.Hold}
	if opts.Width == 0 {
		opts.Width, opts.Height = 1280, 800
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Minute
	}
	// why: a browser context of its own (cookies, storage, cache). Tabs of
	// one context share its cookies, and a cookie's host ignores the port:
	// two parallel tests signed in on 127.0.0.1 servers overwrote each
	// other's console cookie, and one page's requests then carried the
	// other's session with its own CSRF token (403).
	tctx, tcancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(tctx, opts.Timeout)
	p.Ctx = ctx
	t.Cleanup(func() {
		if t.Failed() {
			dctx, dcancel := context.WithTimeout(tctx, 5*time.Second)
			text, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			dcancel()
			t.Logf("the page when the test failed: %s", text)
		}
		cancel()
		tcancel()
		if f := p.Foreign(); len(f) > 0 {
			t.Errorf("the page made requests to other hosts than %s (refused): %v", p.origin, f)
		}
		if t.Failed() {
			t.Logf("page requests: %v\npage script errors: %v", p.Requests(), p.Errors())
		}
	})
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		t.Fatalf("open a tab: %v", err)
	}
	if err := chromedp.Listen(ctx, p.record); err != nil {
		t.Fatalf("listen to the tab: %v", err)
	}
	go p.gate(ctx, chromedp.Events(ctx, fetch.RequestPaused))
	go p.collectConsole(chromedp.Console(ctx))
	err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
				return err
			}
			patterns := []*fetch.RequestPattern{{URLPattern: "*"}}
			if p.hold != nil {
				patterns = append(patterns, &fetch.RequestPattern{URLPattern: "*", RequestStage: fetch.RequestStageResponse})
			}
			_, err := cdp.Call(ctx, tg, fetch.Enable, fetch.EnableParams{Patterns: patterns})
			return err
		}),
		chromedp.EmulateViewport(int64(opts.Width), int64(opts.Height)),
	)
	if err != nil {
		t.Fatalf("set up the tab: %v", err)
	}
	return p
}

// gate lets requests to the origin through and fails the rest. WebSockets
// do not pass through Fetch: record sees them.
func (p *Page) gate(ctx context.Context, paused iter.Seq2[fetch.EventRequestPaused, error]) {
	for ev, err := range paused {
		if err != nil {
			return
		}
		if p.allowed(ev.Request.URL) {
			resume := func() {
				_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			}
			atResponse := ev.ResponseStatusCode != 0 || ev.ResponseErrorReason != ""
			if release := p.holdFor(atResponse, ev.Request.Method, ev.Request.URL); release != nil {
				go func() {
					select {
					case <-release:
						resume()
					case <-ctx.Done():
					}
				}()
				continue
			}
			resume()
			continue
		}
		_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
	}
}

func (p *Page) holdFor(atResponse bool, method, url string) <-chan struct{} {
	if p.hold == nil || !atResponse {
		return nil
	}
	return p.hold(method, url)
}

func (p *Page) collectConsole(msgs iter.Seq2[chromedp.ConsoleMessage, error]) {
	for m, err := range msgs {
		if err != nil {
			return
		}
		if m.IsException() || m.Type == chromedp.ConsoleError {
			p.addError(m.String())
		}
	}
}

// record notes every request and WebSocket the page opens (it runs in the
// tab's event loop: no commands here).
func (p *Page) record(ev any) {
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		p.note(e.Request.URL)
	case *network.EventWebSocketCreated:
		p.note(e.URL)
	}
}

// allowed: the page's own origin (http or ws), and URLs that never leave
// the browser.
func (p *Page) allowed(raw string) bool {
	for _, prefix := range []string{"data:", "blob:", "about:"} {
		if strings.HasPrefix(raw, prefix) {
			return true
		}
	}
	o, err := Origin(raw)
	if err != nil {
		return false
	}
	ws := strings.Replace(strings.Replace(p.origin, "https://", "wss://", 1), "http://", "ws://", 1)
	return o == p.origin || o == ws
}

func (p *Page) note(raw string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, raw)
	if !p.allowed(raw) {
		p.foreign = append(p.foreign, raw)
	}
}

func (p *Page) addError(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errors = append(p.errors, s)
}

// Requests is every URL the page requested, in order.
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Foreign is every request to another origin (each one was refused).
func (p *Page) Foreign() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.foreign)
}

// Errors is every uncaught exception and console.error of the page.
func (p *Page) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.errors)
}

// Do runs actions in the tab and fails the test on an error.
func (p *Page) Do(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(p.Ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Eval evaluates a JavaScript expression in the page (promises are
// awaited) and decodes its value.
func Eval[T any](t testing.TB, p *Page, expr string) T {
	t.Helper()
	v, err := chromedp.Run(p.Ctx, chromedp.Evaluate[T](expr, func(ep *runtime.EvaluateParams) { ep.AwaitPromise = new(true) }))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}
