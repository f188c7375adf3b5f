package workers

import (
	"context"
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard/switchboard/jobs"
)

// TestSigningSecretRotation: during a rotation's overlap a receiver holding
// either secret (verifying with the official Standard Webhooks library)
// accepts the call; once the overlap ended only the new secret does.
func TestSigningSecretRotation(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{allowPrivate: true})
	hook := newHookServer(t, func(int, http.ResponseWriter, *http.Request) {})
	task := b.task(t, webhook(hook.URL))
	ctx := context.Background()
	rotated, err := jobs.RotateSigningSecret(ctx, b.pool, personal(t, b.pool, b.owner), task.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	old, current := task.SigningSecret, rotated.SigningSecret
	verifies := func(secret string, call int) bool {
		t.Helper()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		hits := hook.requests()
		if len(hits) <= call {
			t.Fatalf("%d calls, want call %d", len(hits), call)
		}
		return wh.Verify(hits[call].body, hits[call].header) == nil
	}

	b.waitRun(t, b.trigger(t, task.ID).ID, 15*time.Second)
	if !verifies(old, 0) || !verifies(current, 0) {
		t.Fatalf("during the overlap: old secret verifies %v, new %v; want both (webhook-signature %q)",
			verifies(old, 0), verifies(current, 0), hook.requests()[0].header.Get("webhook-signature"))
	}

	// The overlap ends (as it does at its time).
	if _, err := b.pool.Exec(ctx, `UPDATE tasks SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	b.waitRun(t, b.trigger(t, task.ID).ID, 15*time.Second)
	if verifies(old, 1) || !verifies(current, 1) {
		t.Fatalf("after the overlap: old secret verifies %v, new %v; want only the new", verifies(old, 1), verifies(current, 1))
	}
}
