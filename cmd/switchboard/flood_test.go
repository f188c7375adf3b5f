package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/realtime/stream"
)

// Another account floods a user with three times what a stream keeps —
// through POST /v1/events with to and through dm frames, on two replicas —
// and retention runs: the user's own events and the server's (a publish
// task's event) are all still in its user stream's history and resume,
// and nothing of the flood is among them; the flood is in the user's
// inbox, which keeps its last MaxEvents.
func TestFloodCannotPushOutOwnEvents(t *testing.T) {
	t.Parallel()
	const keep, flood = 20, 60
	dbURL := dbtest.NewDatabaseURL(t)
	cfg := durableConfig(t, dbURL)
	cfg.StreamMaxEvents = keep
	a, b := startServer(t, cfg), startServer(t, cfg)
	victimTok, victimID := registerUser(t, a, "flood-victim@example.com")
	attackerTok, attackerID := registerUser(t, b, "flood-attacker@example.com")
	userStream, inbox := "user:"+victimID, "inbox:"+victimID

	want := publishOwn(t, a, victimTok, victimID, "before", 3)
	want = append(want, runPublishTask(t, b, victimTok, userStream))
	floodInbox(t, a, b, attackerTok, victimID, flood)
	testwait.For(t, 20*time.Second, "the flood stored", func() bool {
		var stored int64 // in whichever of the victim's streams
		err := a.pool.QueryRow(context.Background(), `SELECT coalesce(sum(last_offset), 0) FROM stream_heads WHERE stream = ANY($1)`,
			[]string{userStream, inbox}).Scan(&stored)
		return err == nil && stored == int64(len(want)+flood)
	})
	want = append(want, publishOwn(t, b, victimTok, victimID, "after", 2)...)
	if _, err := stream.Prune(context.Background(), a.pool, stream.Retention{MaxEvents: keep}); err != nil {
		t.Fatal(err) // what prune_streams runs
	}

	status, body := call(t, http.MethodGet, a.URL+"/v1/history?stream="+userStream+"&limit=1000", nil, victimTok)
	if got := describe(t, historyFrames(t, body)); status != http.StatusOK || body["recovered"] != true || !sameLines(got, want) {
		t.Fatalf("history of %s: %d, recovered %v, events %v; want %v", userStream, status, body["recovered"], got, want)
	}
	status, body = call(t, http.MethodGet, b.URL+"/v1/history?stream="+inbox+"&limit=1000", nil, victimTok)
	events := historyFrames(t, body)
	if status != http.StatusOK || len(events) != keep || body["oldest_offset"] != float64(flood-keep+1) || body["last_offset"] != float64(flood) {
		t.Fatalf("history of %s: %d, %d events, %v", inbox, status, len(events), body)
	}
	for _, f := range events {
		if f.From != attackerID || f.Stream != inbox {
			t.Fatalf("in %s: %+v", inbox, f)
		}
	}

	s := connect(t, b, victimTok)
	s.send(t, realtime.Frame{Event: "resume", Payload: json.RawMessage(fmt.Sprintf(`{"streams":{%q:{"offset":0,"epoch":""}}}`, userStream))})
	var resumed []realtime.Frame
	for f := readFrame(t, s); f.Event != realtime.EventResumed; f = readFrame(t, s) {
		resumed = append(resumed, f)
	}
	if got := describe(t, resumed); !sameLines(got, want) {
		t.Fatalf("resume of %s brought %v; want %v", userStream, got, want)
	}
}

// readFrame is s's next frame, whatever its event.
func readFrame(t *testing.T, s *sock) realtime.Frame {
	t.Helper()
	select {
	case f := <-s.frames:
		return f
	case <-s.done:
		t.Fatalf("socket closed: %v", s.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no frame within 10 s")
	}
	return realtime.Frame{}
}

// publishOwn posts n events of the user to itself, tagged prefix-i, and
// returns how they read back.
func publishOwn(t *testing.T, srv *testServer, tok, id, prefix string, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		k := fmt.Sprintf("%s-%d", prefix, i)
		body := map[string]any{"to": id, "event": "note", "payload": map[string]string{"k": k}}
		if status, res := call(t, http.MethodPost, srv.URL+"/v1/events", body, tok); status != http.StatusAccepted {
			t.Fatalf("POST /v1/events to oneself: %d %v", status, res)
		}
		out = append(out, "note "+k+" from "+id)
	}
	return out
}

// runPublishTask runs a publish task of the user once and waits for the
// event the server publishes to it in userStream.
func runPublishTask(t *testing.T, srv *testServer, tok, userStream string) string {
	t.Helper()
	status, task := call(t, http.MethodPost, srv.URL+"/v1/tasks", map[string]any{
		"name": "report", "schedule": "@daily", "action": map[string]any{"type": "publish", "event": "report.ready"},
	}, tok)
	if status != http.StatusCreated {
		t.Fatalf("create task: %d %v", status, task)
	}
	if status, out := call(t, http.MethodPost, srv.URL+"/v1/tasks/"+task["id"].(string)+"/runs", nil, tok); status != http.StatusAccepted {
		t.Fatalf("trigger run: %d %v", status, out)
	}
	testwait.For(t, 20*time.Second, "report.ready stored", func() bool { return lastOffset(t, srv, tok, userStream) == 4 })
	return "report.ready from the server"
}

// floodInbox sends n messages of 4 KiB to victim from the attacker: half
// through POST /v1/events on b, half as dm frames on a socket on a.
func floodInbox(t *testing.T, a, b *testServer, attackerTok, victim string, n int) {
	t.Helper()
	filler := strings.Repeat("x", 4<<10)
	s := connect(t, a, attackerTok)
	drain(s)
	for i := range n {
		payload := map[string]string{"k": fmt.Sprintf("flood-%d", i), "filler": filler}
		if i%2 == 0 {
			body := map[string]any{"to": victim, "event": "note", "payload": payload}
			if status, res := call(t, http.MethodPost, b.URL+"/v1/events", body, attackerTok); status != http.StatusAccepted {
				t.Fatalf("POST /v1/events to the victim: %d %v", status, res)
			}
			continue
		}
		raw, _ := json.Marshal(payload)
		if err := s.conn.WriteJSON(realtime.Frame{Event: "dm", To: victim, Payload: raw}); err != nil {
			t.Fatalf("dm: %v", err)
		}
	}
}

// lastOffset reads a stream's last offset through GET /v1/history.
func lastOffset(t *testing.T, srv *testServer, tok, name string) int64 {
	t.Helper()
	status, body := call(t, http.MethodGet, srv.URL+"/v1/history?stream="+name+"&limit=1", nil, tok)
	if status != http.StatusOK {
		t.Fatalf("history of %s: %d %v", name, status, body)
	}
	return int64(body["last_offset"].(float64))
}

func historyFrames(t *testing.T, body map[string]any) []realtime.Frame {
	t.Helper()
	raw, _ := json.Marshal(body["events"])
	var out []realtime.Frame
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("events %s: %v", raw, err)
	}
	return out
}

// describe writes each frame as "<event> <k> from <sender>", the server's
// as "<event> from the server".
func describe(t *testing.T, frames []realtime.Frame) []string {
	t.Helper()
	out := make([]string, len(frames))
	for i, f := range frames {
		var p struct {
			K string `json:"k"`
		}
		_ = json.Unmarshal(f.Payload, &p)
		switch {
		case f.From == "":
			out[i] = f.Event + " from the server"
		default:
			out[i] = f.Event + " " + p.K + " from " + f.From
		}
	}
	return out
}

func sameLines(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }
