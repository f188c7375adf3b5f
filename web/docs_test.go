package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/infra/testkit/browsertest"
)

// TestDocsPageOffline opens /docs in headless Chromium with every request to
// another host refused: the page renders every operation from assets the
// binary serves, and "Try it out" calls the same server.
func TestDocsPageOffline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(b.server)
	t.Cleanup(srv.Close)
	ops := len(operationIDs(t, b))

	page := browsertest.NewPage(t, browsertest.Options{Origin: srv.URL})
	page.Do(t, "open /docs", chromedp.Navigate(srv.URL+"/docs"),
		chromedp.WaitVisible(chromedp.CSS(`#operations-Auth-auth-register`)))
	if n := browsertest.Eval[int](t, page, `document.querySelectorAll('.opblock').length`); n != ops {
		t.Fatalf("the page shows %d operations, the document has %d", n, ops)
	}
	title := browsertest.Eval[string](t, page, `document.querySelector('.info .title').textContent`)
	if !strings.Contains(title, "Switchboard") {
		t.Fatalf("title %q", title)
	}

	page.Do(t, "try GET /healthz/live",
		chromedp.Click(chromedp.CSS(`#operations-Service-health-live .opblock-summary-control`)),
		chromedp.Click(chromedp.CSS(`#operations-Service-health-live .try-out__btn`)),
		chromedp.Click(chromedp.CSS(`#operations-Service-health-live .execute`)),
		chromedp.WaitVisible(chromedp.CSS(`#operations-Service-health-live .live-responses-table tbody .response-col_status`)),
	)
	status := browsertest.Eval[string](t, page, `document.querySelector('#operations-Service-health-live .live-responses-table tbody .response-col_status').textContent.trim()`)
	reqURL := browsertest.Eval[string](t, page, `document.querySelector('#operations-Service-health-live .request-url pre').textContent.trim()`)
	if status != "200" || reqURL != srv.URL+"/healthz/live" {
		t.Fatalf("try it out: status %q, request url %q (want 200 from %s)", status, reqURL, srv.URL)
	}
}

// operationIDs lists the operations of the served OpenAPI document.
func operationIDs(t *testing.T, b *testBundle) []string {
	t.Helper()
	res := b.do(t, http.MethodGet, "/openapi.json", nil, "")
	var ids []string
	for _, item := range res.body["paths"].(map[string]any) {
		for _, op := range item.(map[string]any) {
			if m, ok := op.(map[string]any); ok && m["operationId"] != nil {
				ids = append(ids, m["operationId"].(string))
			}
		}
	}
	return ids
}
