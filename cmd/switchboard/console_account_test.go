package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/infra/testkit/browsertest"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// TestConsoleSignInFollowsTheRegistrationPolicy: the sign-in page offers
// "Create account" only where registration is open, and asks for an invite
// token where it needs one.
func TestConsoleSignInFollowsTheRegistrationPolicy(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	for _, policy := range []string{"closed", "invite"} {
		cfg := testConfig(t, dbURL)
		cfg.Registration = policy
		srv := startServer(t, cfg)
		page := browsertest.NewPage(t, browsertest.Options{Origin: srv.URL})
		page.Do(t, "open the sign-in page ("+policy+")",
			chromedp.Navigate(srv.URL+"/console"),
			chromedp.WaitVisible(chromedp.CSS(`form[data-registration=`+policy+`]`)))
		hasRegister := browsertest.Eval[bool](t, page, `!!document.getElementById('register')`)
		hasInvite := browsertest.Eval[bool](t, page, `!!document.querySelector('input[name=invite]')`)
		note := browsertest.Eval[string](t, page, `document.getElementById('registration-note').textContent`)
		switch {
		case policy == "closed" && (hasRegister || hasInvite || !strings.Contains(note, "closed")):
			t.Fatalf("closed: register button %v, invite field %v, note %q", hasRegister, hasInvite, note)
		case policy == "invite" && (!hasRegister || !hasInvite):
			t.Fatalf("invite: register button %v, invite field %v", hasRegister, hasInvite)
		}
		requireLabelled(t, page)
		if policy == "invite" {
			page.Do(t, "a registration with a token that is no invite is refused, saying why",
				chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "walk-in@example.com"),
				chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "correct horse"),
				chromedp.SendKeys(chromedp.CSS(`input[name=invite]`), "sbi_not-a-real-invite"),
				chromedp.Click(chromedp.ID("register")),
				chromedp.WaitVisible(chromedp.CSS(`.error[role=alert]`)))
			if d := text(t, page, ".error .detail"); !strings.Contains(d, "invite") {
				t.Fatalf("the refusal says %q", d)
			}
		}
	}
}

// TestConsoleAccountPages: a reset link opens the console's reset page,
// which sets the password; the account page changes it (the page stays
// signed in) and signs out everywhere.
func TestConsoleAccountPages(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	srv := startServer(t, cfg)
	srv.cfg.PublicURL = srv.URL // for the CLI's link
	token, _ := registerUser(t, srv, "pages@example.com")
	out := runAdminWithInput(t, srv, "", "reset-password", "pages@example.com")
	link := out[strings.Index(out, srv.URL):]
	link = strings.TrimSpace(link)

	page := browsertest.NewPage(t, browsertest.Options{Origin: srv.URL})
	page.Do(t, "follow the reset link and set a password",
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("reset")),
		chromedp.SendKeys(chromedp.CSS(`input[name=new-password]`), "battery staple"),
		chromedp.Click(chromedp.ID("reset")),
		chromedp.WaitVisible(chromedp.ID("signin")))
	requireRefusedEverywhere(t, []*testServer{srv}, token, "the console's reset page")

	page.Do(t, "sign in with the new password and change it on the account page",
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "pages@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "battery staple\r"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state=live]`)),
		chromedp.Click(chromedp.CSS(`a[data-nav=account]`)),
		chromedp.WaitVisible(chromedp.ID("change-password")),
		chromedp.SendKeys(chromedp.CSS(`input[name=current-password]`), "battery staple"),
		chromedp.SendKeys(chromedp.CSS(`input[name=new-password]`), "horse of course"),
		chromedp.Click(chromedp.ID("change-password")),
		chromedp.WaitVisible(chromedp.CSS(`#main .ok`)))
	requireLabelled(t, page)
	other := login(t, srv.URL, "pages@example.com", "horse of course")
	page.Do(t, "the page is still signed in after the change",
		chromedp.Click(chromedp.CSS(`a[data-nav=tasks]`)),
		chromedp.WaitVisible(chromedp.ID("create-first")))

	page.Do(t, "sign out everywhere",
		chromedp.Click(chromedp.CSS(`a[data-nav=account]`)),
		chromedp.WaitVisible(chromedp.ID("signout-everywhere")),
		chromedp.Click(chromedp.ID("signout-everywhere")),
		chromedp.WaitVisible(chromedp.ID("signin")))
	if status, _ := call(t, http.MethodGet, srv.URL+"/v1/me", nil, other); status != http.StatusUnauthorized {
		t.Fatalf("another token after signing out everywhere: %d", status)
	}
	if errs := page.Errors(); len(errs) > 0 {
		t.Fatalf("page errors: %v", errs)
	}
}
