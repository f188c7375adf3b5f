package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/infra/testkit/browsertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}

// cookieServer sets the cookie "who" to name on /set and answers the
// cookie it got on /who.
func cookieServer(t *testing.T, name string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/set":
			http.SetCookie(w, &http.Cookie{Name: "who", Value: name, Path: "/"})
		case "/who":
			if c, err := r.Cookie("who"); err == nil {
				_, _ = w.Write([]byte(c.Value))
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPagesKeepTheirOwnCookies: two pages on two local servers (one
// host, two ports: one cookie jar for a browser context) do not see each
// other's cookies, as two parallel browser tests must not.
func TestPagesKeepTheirOwnCookies(t *testing.T) {
	a, b := cookieServer(t, "a"), cookieServer(t, "b")
	pa := browsertest.NewPage(t, browsertest.Options{Origin: a.URL})
	pb := browsertest.NewPage(t, browsertest.Options{Origin: b.URL})
	pa.Do(t, "set a's cookie", chromedp.Navigate(a.URL+"/set"))
	pb.Do(t, "set b's cookie", chromedp.Navigate(b.URL+"/set"))
	if got := browsertest.Eval[string](t, pa, `fetch('/who').then((r) => r.text())`); got != "a" {
		t.Fatalf("page a sent the cookie %q, want its own (a)", got)
	}
}
