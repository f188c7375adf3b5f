package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/infra/testkit/browsertest"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// The console's projects in headless Chromium on a real server and
// database: an owner creates a project and invites a second account from
// the members page, which accepts through the invite link and sees the
// project's tasks and a run arriving live; a viewer sees no control it
// cannot use; the API keys page shows a secret once.

// editControls are the labels of the buttons that change tasks and runs.
var editControls = []string{"New task", "Create your first task", "Run now", "Pause", "Resume", "Edit", "Delete", "Cancel", "Retry"}

// visibleButtons lists the text of every button shown on the page.
func visibleButtons(t *testing.T, page *browsertest.Page) []string {
	t.Helper()
	return browsertest.Eval[[]string](t, page, `[...document.querySelectorAll('button')].filter((b) => b.offsetParent !== null).map((b) => b.textContent)`)
}

// requireNone fails when the page shows a button labelled one of labels.
func requireNone(t *testing.T, page *browsertest.Page, where string, labels []string) {
	t.Helper()
	for _, b := range visibleButtons(t, page) {
		for _, l := range labels {
			if b == l {
				t.Errorf("%s: the button %q is shown", where, b)
			}
		}
	}
}

// chooseProject picks a project in the header's switcher, as a person would.
func chooseProject(t *testing.T, page *browsertest.Page, id string) {
	t.Helper()
	browsertest.Eval[bool](t, page, fmt.Sprintf(`(() => { const s = document.getElementById('project'); s.value = %q; s.dispatchEvent(new Event('change')); return s.value === %q })()`, id, id))
}

func TestConsoleProjectsMembersAndKeys(t *testing.T) {
	t.Parallel()
	srv := startServer(t, testConfig(t, dbtest.NewDatabaseURL(t)))
	ownerToken, _ := registerUser(t, srv, "owner@example.com")
	registerUser(t, srv, "second@example.com")
	viewerToken, _ := registerUser(t, srv, "viewer@example.com")

	owner := browsertest.NewPage(t, browsertest.Options{Origin: srv.URL})
	signIn(t, owner, srv.URL, "owner@example.com", false)
	if _, err := chromedp.Run(owner.Ctx, chromedp.PollFunction[bool](`() => document.getElementById('project')?.options.length > 0`)); err != nil {
		t.Fatalf("the switcher never listed the personal project: %v", err)
	}
	owner.Do(t, "open the members page",
		chromedp.Click(chromedp.CSS(`a[data-nav=members]`)),
		chromedp.WaitVisible(chromedp.ID("create-project")))
	owner.Do(t, "create a project there",
		chromedp.SendKeys(chromedp.CSS(`input[name=project-name]`), "Platform"),
		chromedp.Click(chromedp.ID("create-project")),
		chromedp.WaitVisible(chromedp.ID("create-first")))
	project := browsertest.Eval[string](t, owner, `document.getElementById('project').value`)
	if name := browsertest.Eval[string](t, owner, `document.getElementById('project').selectedOptions[0].textContent`); name != "Platform" {
		t.Fatalf("the switcher shows %q after creating the project", name)
	}
	status, body := callIn(t, http.MethodPost, srv.URL+"/v1/tasks", map[string]any{
		"name": "shared report", "action": map[string]any{"type": "publish", "event": "report.ready"},
	}, ownerToken, project)
	mustStatus(t, http.StatusCreated, status, body, "create a task in the project")
	taskID := body["id"].(string)

	t.Log("the owner invites a second account: the link is shown once, the invite is pending")
	owner.Do(t, "invite second@example.com as a developer",
		chromedp.Click(chromedp.CSS(`a[data-nav=members]`)),
		chromedp.WaitVisible(chromedp.ID("invite")),
		chromedp.SendKeys(chromedp.CSS(`input[name=invite-email]`), "second@example.com"),
		chromedp.Click(chromedp.ID("invite")),
		chromedp.WaitVisible(chromedp.CSS(`#invite-link .secret`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-invite="second@example.com"]`)))
	requireLabelled(t, owner)
	link := text(t, owner, `#invite-link .secret`)
	if !strings.HasPrefix(link, srv.URL+"/console/#/invite?token=sbi_") {
		t.Fatalf("the invite link shown: %q", link)
	}

	t.Log("the second account follows the link, signs in, accepts, and sees the project's tasks and a run live")
	second := browsertest.NewPage(t, browsertest.Options{Origin: srv.URL})
	second.Do(t, "open the invite link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("signin")))
	// Filled by script: the link's fragment navigation can renew the DOM
	// nodes chromedp resolved for typing.
	setValue(t, second, `input[name=email]`, "second@example.com")
	setValue(t, second, `input[name=password]`, "correct horse")
	pressButton(t, second, "Sign in")
	second.Do(t, "accept the invite and see the project's task, then open it",
		chromedp.WaitVisible(chromedp.ID("accept-invite")),
		chromedp.Click(chromedp.ID("accept-invite")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-task-id="`+taskID+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state=live]`)),
		chromedp.Click(chromedp.CSS(`tr[data-task-id="`+taskID+`"] a`)),
		chromedp.WaitVisible(chromedp.ID("run-now")),
		chromedp.WaitVisible(chromedp.CSS(`table.runs[aria-busy=false]`)),
		chromedp.WaitVisible(chromedp.CSS(`.empty-runs`)))
	browsertest.Eval[bool](t, second, `window.notReloaded = true`)
	status, body = callIn(t, http.MethodPost, srv.URL+"/v1/tasks/"+taskID+"/runs", map[string]any{}, ownerToken, project)
	mustStatus(t, http.StatusAccepted, status, body, "the owner triggers the task")
	// Bounded below the page's two minutes: a run that never comes live
	// fails here, not at the end of the test.
	live, cancel := context.WithTimeout(second.Ctx, 45*time.Second)
	defer cancel()
	if _, err := chromedp.Run(live, chromedp.WaitVisible(chromedp.CSS(`tr[data-run-id="`+body["id"].(string)+`"][data-status=succeeded]`))); err != nil {
		t.Fatalf("the owner's run did not arrive on the second account's page: %v", err)
	}
	if !browsertest.Eval[bool](t, second, `window.notReloaded === true`) {
		t.Fatal("the page reloaded")
	}
	owner.Do(t, "the accepted invite is no longer pending",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-member="second@example.com"][data-role=developer]`)))
	if n := browsertest.Eval[int](t, owner, `document.querySelectorAll('tr[data-invite]').length`); n != 0 {
		t.Fatalf("%d invites still pending", n)
	}

	t.Run("a viewer sees no control it cannot use", func(t *testing.T) {
		inviteMember(t, srv, srv, ownerToken, project, "viewer@example.com", "viewer", viewerToken)
		viewer := browsertest.NewPage(t, browsertest.Options{Origin: srv.URL})
		signIn(t, viewer, srv.URL, "viewer@example.com", false)
		chooseProject(t, viewer, project)
		viewer.Do(t, "the project's tasks", chromedp.WaitVisible(chromedp.CSS(`tr[data-task-id="`+taskID+`"] a`)))
		requireNone(t, viewer, "tasks", editControls)
		viewer.Do(t, "open the task",
			chromedp.Click(chromedp.CSS(`tr[data-task-id="`+taskID+`"] a`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-run-id][data-status=succeeded]`)))
		requireNone(t, viewer, "the task", editControls)
		viewer.Do(t, "the members page",
			chromedp.Click(chromedp.CSS(`a[data-nav=members]`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-member="owner@example.com"]`)))
		requireNone(t, viewer, "members", []string{"Invite", "Remove", "Revoke"})
		if browsertest.Eval[bool](t, viewer, `!!document.querySelector('#invite-form, select[name=role]') || document.querySelector('a[data-nav=keys]').offsetParent !== null`) {
			t.Error("a viewer is offered invites, role changes or the API keys page")
		}
	})

	t.Run("the API keys page shows a secret once", func(t *testing.T) {
		owner.Do(t, "create a key",
			chromedp.Click(chromedp.CSS(`a[data-nav=keys]`)),
			chromedp.WaitVisible(chromedp.ID("create-key")),
			chromedp.SendKeys(chromedp.CSS(`input[name=key-name]`), "deploy bot"),
			chromedp.Click(chromedp.ID("create-key")),
			chromedp.WaitVisible(chromedp.CSS(`#key-secret .secret`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-key-id] .prefix`)))
		requireLabelled(t, owner)
		secret := text(t, owner, `#key-secret .secret`)
		if !strings.HasPrefix(secret, "sbk_") || !strings.HasPrefix(text(t, owner, `tr[data-key-id] .prefix`), secret[:12]) {
			t.Fatalf("secret %q, listed prefix %q", secret, text(t, owner, `tr[data-key-id] .prefix`))
		}
		if status, _ := callIn(t, http.MethodGet, srv.URL+"/v1/tasks/"+taskID, nil, secret, ""); status != http.StatusOK {
			t.Fatalf("the key shown reads the project's task: %d", status)
		}
		owner.Do(t, "reload: the key is listed in the remembered project, its secret is gone",
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-key-id] .prefix`)))
		if got := browsertest.Eval[string](t, owner, `document.getElementById('project').value`); got != project {
			t.Fatalf("after a reload the switcher is on %q, want the chosen %q", got, project)
		}
		if browsertest.Eval[bool](t, owner, fmt.Sprintf(`!!document.getElementById('key-secret') || document.body.innerText.includes(%q)`, secret)) {
			t.Fatal("the secret is shown again after a reload")
		}
	})
	for _, p := range []*browsertest.Page{owner, second} {
		for _, e := range p.Errors() {
			// The console asks for its session before anyone signed in:
			// that 401 is how it learns to show the sign-in page.
			if !strings.Contains(e, "status of 401") {
				t.Errorf("page error: %v", e)
			}
		}
	}
}
