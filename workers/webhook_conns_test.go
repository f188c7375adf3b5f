package workers

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/jobs"
)

// TestWebhookReusesConnections: as many concurrent calls to one target as
// a node has run workers keep their connections for the next calls
// (idle connections per host: DefaultMaxWorkers), instead of closing most
// and dialling again each time.
func TestWebhookReusesConnections(t *testing.T) {
	t.Parallel()
	const concurrent = 100
	var dialled atomic.Int32
	var mu sync.Mutex
	inFlight, release := 0, make(chan struct{})
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		wait := release
		if inFlight++; inFlight == concurrent {
			close(release) // every call holds its own connection now
		}
		mu.Unlock()
		<-wait
		w.WriteHeader(http.StatusNoContent)
	}))
	target.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	target.Start()
	defer target.Close()
	client := NewWebhookClient(WebhookOptions{AllowPrivate: true})
	secret := jobs.NewSigningSecret()
	wave := func() {
		var wg sync.WaitGroup
		for range concurrent {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := client.Send(context.Background(), WebhookRequest{URL: target.URL, Method: http.MethodPost, MsgID: "m", Secret: secret}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	wave()
	mu.Lock()
	inFlight, release = 0, make(chan struct{})
	mu.Unlock()
	wave()
	if n := dialled.Load(); n != concurrent {
		t.Fatalf("%d connections for two waves of %d concurrent calls, want %d (the second wave reuses them)", n, concurrent, concurrent)
	}
}
