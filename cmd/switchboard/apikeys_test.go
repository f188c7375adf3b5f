package main

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// answer is an HTTP answer kept whole, to compare replays byte for byte.
type answer struct {
	status   int
	body     []byte
	replayed string
}

func postKeyed(t *testing.T, url, token, key, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return answer{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: b, replayed: res.Header.Get("Idempotent-Replayed")}
}

// TestAPIKeyRevokedEverywhereAtOnce: a key revoked on one replica is refused
// by the next request on every other.
func TestAPIKeyRevokedEverywhereAtOnce(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 3)
	token, userID := registerUser(t, servers[0], "keys@example.com")
	status, key := call(t, http.MethodPost, servers[0].URL+"/v1/api-keys", map[string]any{"name": "ci"}, token)
	if status != http.StatusCreated {
		t.Fatalf("create key: %d %v", status, key)
	}
	secret := key["secret"].(string)
	for i, s := range servers {
		if status, me := call(t, http.MethodGet, s.URL+"/v1/me", nil, secret); status != http.StatusOK || me["id"] != userID {
			t.Fatalf("key on replica %d: %d %v", i, status, me)
		}
	}
	if status, _ := call(t, http.MethodDelete, servers[0].URL+"/v1/api-keys/"+key["id"].(string), nil, token); status != http.StatusNoContent {
		t.Fatalf("revoke: %d", status)
	}
	for i, s := range servers {
		if status, body := call(t, http.MethodGet, s.URL+"/v1/me", nil, secret); status != http.StatusUnauthorized {
			t.Fatalf("revoked key on replica %d: %d %v", i, status, body)
		}
	}
	if status, _ := call(t, http.MethodGet, servers[2].URL+"/v1/me", nil, token); status != http.StatusOK {
		t.Fatalf("the owner's token after the revoke: %d", status)
	}
}

// TestIdempotencyKeyAcrossReplicas: concurrent duplicates of a POST with one
// Idempotency-Key, spread over three replicas, create one resource, and
// every one of them gets the same answer.
func TestIdempotencyKeyAcrossReplicas(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 3)
	// One credential's duplicates (an API key's keys are its own: a replay
	// goes only to the credential that got the answer).
	token, _ := registerUser(t, servers[0], "idem@example.com")

	duplicates := func(t *testing.T, path, body string) []answer {
		t.Helper()
		key := uuid.NewString()
		answers := make([]answer, 12)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				// A duplicate waits 5 s for the first's answer, then is
				// told to retry (409): on a loaded machine the first may
				// take longer. A client retries, as docs/api.md says.
				deadline := time.Now().Add(time.Minute)
				for {
					answers[i] = postKeyed(t, servers[i%3].URL+path, token, key, body)
					if answers[i].status != http.StatusConflict || !bytes.Contains(answers[i].body, []byte("still in flight")) || time.Now().After(deadline) {
						return
					}
				}
			})
		}
		wg.Wait()
		replays := 0
		for i, a := range answers {
			if a.status != answers[0].status || !bytes.Equal(a.body, answers[0].body) {
				t.Fatalf("answer %d differs: %d %s / %d %s", i, a.status, a.body, answers[0].status, answers[0].body)
			}
			if a.replayed == "true" {
				replays++
			}
		}
		if replays != len(answers)-1 {
			t.Fatalf("%d replays of %d answers, want all but one", replays, len(answers))
		}
		return answers
	}

	created := duplicates(t, "/v1/tasks", `{"name":"once","schedule":"@daily","overlap":"allow","action":{"type":"publish","event":"tick"}}`)
	if created[0].status != http.StatusCreated {
		t.Fatalf("create: %d %s", created[0].status, created[0].body)
	}
	if status, list := call(t, http.MethodGet, servers[1].URL+"/v1/tasks", nil, token); status != http.StatusOK || len(list["items"].([]any)) != 1 {
		t.Fatalf("tasks: %d %v, want one", status, list)
	}
	_, tasks := call(t, http.MethodGet, servers[2].URL+"/v1/tasks", nil, token)
	taskID := tasks["items"].([]any)[0].(map[string]any)["id"].(string)

	runs := duplicates(t, "/v1/tasks/"+taskID+"/runs", "")
	if runs[0].status != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", runs[0].status, runs[0].body)
	}
	if status, list := call(t, http.MethodGet, servers[0].URL+"/v1/tasks/"+taskID+"/runs", nil, token); status != http.StatusOK || len(list["items"].([]any)) != 1 {
		t.Fatalf("runs: %d %v, want one", status, list)
	}
}
