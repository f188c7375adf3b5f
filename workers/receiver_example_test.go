package workers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard/switchboard/jobs"
)

// receiver is the webhook receiver docs/jobs.md shows: it verifies the
// Standard Webhooks signature with the official library (which also
// refuses timestamps more than 5 minutes off) and handles each run once,
// keyed by webhook-id (the run id, the same on every retry).
func receiver(secret string, handle func(runID string, body []byte)) (http.Handler, error) {
	wh, err := standardwebhooks.NewWebhook(secret) // the task's whsec_… signing_secret
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized) // 4xx: not retried
			return
		}
		id := r.Header.Get("webhook-id")
		mu.Lock()
		first := !seen[id]
		seen[id] = true
		mu.Unlock()
		if first {
			handle(id, body)
		}
		w.WriteHeader(http.StatusNoContent)
	}), nil
}

// Example_receiver: a signed call from Switchboard's webhook client is
// accepted; the same call with a tampered body is refused.
func Example_receiver() {
	secret := jobs.NewSigningSecret()
	h, _ := receiver(secret, func(runID string, body []byte) { fmt.Printf("run %s: %s\n", runID, body) })
	srv := httptest.NewServer(h)
	defer srv.Close()

	client := NewWebhookClient(WebhookOptions{AllowPrivate: true})
	req := WebhookRequest{URL: srv.URL, Method: http.MethodPost, Body: []byte(`{"order":42}`), MsgID: "run-1", Secret: secret}
	res, _ := client.Send(context.Background(), req)
	fmt.Println(res.Status)
	res, _ = client.Send(context.Background(), req) // a retry: same webhook-id, handled once
	fmt.Println(res.Status)

	other := req
	other.Secret = jobs.NewSigningSecret() // signed with another task's secret
	res, _ = client.Send(context.Background(), other)
	fmt.Println(res.Status)
	// Output:
	// run run-1: {"order":42}
	// 204
	// 204
	// 401
}
