package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime"
)

// durableConfig is a replica whose WebSocket limits let a test publish fast.
func durableConfig(t *testing.T, dbURL string) config.Config {
	cfg := testConfig(t, dbURL)
	cfg.WSLimits = config.WSLimits{ConnFrameRate: 1e5, ConnFrameBurst: 1e5, UserFrameRate: 1e5, UserFrameBurst: 1e5, UserByteRate: 1 << 30, Strikes: 20, MaxConnsPerUser: 50}
	return cfg
}

// drain reads a socket's frames and forgets them.
func drain(s *sock) {
	go func() {
		for {
			select {
			case <-s.frames:
			case <-s.done:
				return
			}
		}
	}()
}

type streamPos struct {
	Offset int64  `json:"offset"`
	Epoch  string `json:"epoch"`
}

// reader is a client that applies each stored frame only if it is the
// next offset of its stream, and fails on anything else.
type reader struct {
	pos  map[string]streamPos
	tags map[string]int // payload "k" -> times received
	runs map[string]int // task.run.* events -> times received
}

func (r *reader) apply(t *testing.T, f realtime.Frame) {
	t.Helper()
	p := r.pos[f.Stream]
	if f.Offset != p.Offset+1 || (p.Epoch != "" && f.Epoch != p.Epoch) {
		t.Fatalf("%s: offset %d (epoch %s) after %d (epoch %s)", f.Stream, f.Offset, f.Epoch, p.Offset, p.Epoch)
	}
	r.pos[f.Stream] = streamPos{Offset: f.Offset, Epoch: f.Epoch}
	var body struct {
		K string `json:"k"`
	}
	if json.Unmarshal(f.Payload, &body) == nil && body.K != "" {
		r.tags[body.K]++
	} else {
		r.runs[f.Event]++
	}
}

// Three replicas publish concurrently — API events and DMs from sockets on
// each (to the reader's inbox), room messages, run events and a publish
// task's events (to its user stream) — to one user and one room, and run
// events to the user's project, while the reader disconnects and resumes
// at random points on random replicas: every offset arrives exactly once,
// in order, and nothing else.
func TestStreamsExactlyOnceAcrossResumes(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	servers := []*testServer{startServer(t, durableConfig(t, dbURL)), startServer(t, durableConfig(t, dbURL)), startServer(t, durableConfig(t, dbURL))}
	readerTok, readerID := registerUser(t, servers[0], "reader@example.com")
	const room, perKind, runs = "durable", 25, 4
	userStream, inboxStream, roomStream := "user:"+readerID, "inbox:"+readerID, "room:"+room

	type sender struct {
		tok string
		s   *sock
	}
	senders := make([]sender, len(servers))
	for i, srv := range servers {
		tok, id := registerUser(t, srv, fmt.Sprintf("sender%d@example.com", i))
		s := connect(t, srv, tok)
		connected(t, srv, id, 1)
		s.send(t, realtime.Frame{Event: "room.join", Room: room})
		s.expect(t, "room.joined")
		drain(s)
		senders[i] = sender{tok, s}
	}
	status, task := call(t, http.MethodPost, servers[0].URL+"/v1/tasks", map[string]any{
		"name": "report", "schedule": "@daily", "overlap": "allow", "action": map[string]any{"type": "publish", "event": "report.ready"},
	}, readerTok)
	if status != http.StatusCreated {
		t.Fatalf("create task: %d %v", status, task)
	}

	want := map[string]bool{}
	var wg sync.WaitGroup
	for i, srv := range servers {
		for kind, to := range map[string]map[string]any{"api-user": {"to": readerID}, "api-room": {"room": room}} {
			wg.Go(func() {
				for j := range perKind {
					k := fmt.Sprintf("%s-%d-%d", kind, i, j)
					body := map[string]any{"event": "note", "payload": map[string]string{"k": k}}
					for f, v := range to {
						body[f] = v
					}
					if status, out := call(t, http.MethodPost, srv.URL+"/v1/events", body, senders[i].tok); status != http.StatusAccepted {
						t.Errorf("POST /v1/events: %d %v", status, out)
					}
				}
			})
		}
		for j := range perKind {
			want[fmt.Sprintf("api-user-%d-%d", i, j)], want[fmt.Sprintf("api-room-%d-%d", i, j)] = true, true
			want[fmt.Sprintf("dm-%d-%d", i, j)], want[fmt.Sprintf("msg-%d-%d", i, j)] = true, true
		}
		wg.Go(func() {
			for j := range perKind {
				payload := json.RawMessage(fmt.Sprintf(`{"k":"dm-%d-%d"}`, i, j))
				if err := senders[i].s.conn.WriteJSON(realtime.Frame{Event: "dm", To: readerID, Payload: payload}); err != nil {
					t.Errorf("dm: %v", err)
				}
				payload = json.RawMessage(fmt.Sprintf(`{"k":"msg-%d-%d"}`, i, j))
				if err := senders[i].s.conn.WriteJSON(realtime.Frame{Event: "room.message", Room: room, Payload: payload}); err != nil {
					t.Errorf("room.message: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		for range runs {
			if status, out := call(t, http.MethodPost, servers[1].URL+"/v1/tasks/"+task["id"].(string)+"/runs", nil, readerTok); status != http.StatusAccepted {
				t.Errorf("trigger run: %d %v", status, out)
			}
		}
	})

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	// The task's run events go to its project's stream, which the reader
	// follows from its start as it does its user stream and the room.
	projectStream := "project:" + task["project_id"].(string)
	r := &reader{pos: map[string]streamPos{userStream: {}, inboxStream: {}, roomStream: {}, projectStream: {}}, tags: map[string]int{}, runs: map[string]int{}}
	total := len(want) + runs*4 // queued, running, succeeded, report.ready
	deadline := time.Now().Add(90 * time.Second)
	for connections := 1; ; connections++ {
		srv := servers[rng.IntN(len(servers))]
		s := connect(t, srv, readerTok)
		resume, _ := json.Marshal(map[string]any{"streams": r.pos})
		s.send(t, realtime.Frame{Event: "resume", Payload: resume})
		quota := rng.IntN(60) + 1
	reading:
		for n := 0; n < quota; {
			select {
			case f := <-s.frames:
				switch {
				case f.Stream != "":
					r.apply(t, f)
					n++
				case f.Event == "resumed":
					var p struct {
						Streams map[string]struct{ Recovered bool } `json:"streams"`
					}
					_ = json.Unmarshal(f.Payload, &p)
					for name, st := range p.Streams {
						if !st.Recovered {
							t.Fatalf("connection %d: %s not recovered", connections, name)
						}
					}
				case f.Event != "room.joined":
					t.Fatalf("unexpected frame %+v", f)
				}
			case <-time.After(3 * time.Second):
				break reading
			case <-s.done:
				t.Fatalf("socket closed: %v", s.err)
			}
		}
		_ = s.conn.Close() // abruptly, frames in flight are lost to this client
		got := 0
		for _, n := range r.tags {
			got += n
		}
		for _, n := range r.runs {
			got += n
		}
		if got >= total {
			t.Logf("%d events over %d connections", got, connections)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d connections: %d of %d events", connections, got, total)
		}
	}
	wg.Wait()
	for k := range want {
		if r.tags[k] != 1 {
			t.Errorf("%s arrived %d times", k, r.tags[k])
		}
	}
	if len(r.tags) != len(want) {
		t.Errorf("%d distinct tagged events, want %d", len(r.tags), len(want))
	}
	for _, ev := range []string{"task.run.queued", "task.run.running", "task.run.succeeded", "report.ready"} {
		if r.runs[ev] != runs {
			t.Errorf("%s arrived %d times, want %d", ev, r.runs[ev], runs)
		}
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for name, p := range r.pos {
		var last int64
		if err := conn.QueryRow(context.Background(), `SELECT last_offset FROM stream_heads WHERE stream = $1`, name).Scan(&last); err != nil || last != p.Offset {
			t.Errorf("%s: read up to %d, stored up to %d (%v)", name, p.Offset, last, err)
		}
	}
}

// LISTEN killed on one replica while the others
// publish to its sockets: once it reconnects its sockets have every event.
func TestListenKilledLosesNothing(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a, b, c := startServer(t, durableConfig(t, dbURL)), startServer(t, durableConfig(t, dbURL)), startServer(t, durableConfig(t, dbURL))
	tok, id := registerUser(t, a, "listen-reader@example.com")
	s := connect(t, b, tok)
	s.send(t, realtime.Frame{Event: "room.join", Room: "kill"})
	s.expect(t, "room.joined")
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const n = 150
	var wg sync.WaitGroup
	for i, srv := range []*testServer{a, c} {
		wg.Go(func() {
			for j := range n {
				body := map[string]any{"event": "note", "payload": j, "to": id}
				if j%2 == 1 {
					body = map[string]any{"event": "note", "payload": j, "room": "kill"}
				}
				if status, out := call(t, http.MethodPost, srv.URL+"/v1/events", body, tok); status != http.StatusAccepted {
					t.Errorf("replica %d: POST /v1/events: %d %v", i, status, out)
				}
			}
		})
	}
	last := map[string]int64{}
	got := 0
	for got < 2*n {
		if got == n/2 { // mid-stream: B's LISTEN backend is killed
			if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, b.bus.ListenApplicationName()); err != nil {
				t.Fatal(err)
			}
		}
		f := s.expect(t, "note")
		if f.Offset != last[f.Stream]+1 {
			t.Fatalf("%s: offset %d after %d", f.Stream, f.Offset, last[f.Stream])
		}
		last[f.Stream] = f.Offset
		got++
	}
	wg.Wait()
	testwait.For(t, 10*time.Second, "B's LISTEN reconnected", func() bool {
		return metric(t, b, "switchboard_bus_listen_reconnects_total", "") >= 1 && b.bus.Ready(context.Background()) == nil
	})
	if last["user:"+id]+last["room:kill"] != 2*n {
		t.Fatalf("positions %v", last)
	}
}

// GET /v1/history reads a user's own stream and its inbox (what another
// user sent it), a room's; never another user's.
func TestHistory(t *testing.T) {
	t.Parallel()
	srv := startServer(t, durableConfig(t, dbtest.NewDatabaseURL(t)))
	tok, id := registerUser(t, srv, "history@example.com")
	otherTok, otherID := registerUser(t, srv, "history-other@example.com")
	for i := range 3 {
		if status, out := call(t, http.MethodPost, srv.URL+"/v1/events", map[string]any{"to": id, "event": "note", "payload": i}, otherTok); status != http.StatusAccepted {
			t.Fatalf("publish: %d %v", status, out)
		}
	}
	if status, out := call(t, http.MethodPost, srv.URL+"/v1/events", map[string]any{"to": id, "event": "self", "payload": 9}, tok); status != http.StatusAccepted {
		t.Fatalf("publish to oneself: %d %v", status, out)
	}
	status, body := call(t, http.MethodGet, srv.URL+"/v1/history?stream=inbox:"+id+"&since=1", nil, tok)
	events, _ := body["events"].([]any)
	if status != http.StatusOK || len(events) != 2 || body["last_offset"] != 3.0 || body["oldest_offset"] != 1.0 || body["recovered"] != true {
		t.Fatalf("history: %d %v", status, body)
	}
	if e := events[0].(map[string]any); e["offset"] != 2.0 || e["stream"] != "inbox:"+id || e["epoch"] != body["epoch"] || e["payload"] != 1.0 || e["event"] != "note" || e["from"] != otherID || e["to"] != id {
		t.Fatalf("first event %v", e)
	}
	status, body = call(t, http.MethodGet, srv.URL+"/v1/history?stream=user:"+id, nil, tok)
	if events, _ = body["events"].([]any); status != http.StatusOK || len(events) != 1 || events[0].(map[string]any)["event"] != "self" {
		t.Fatalf("own stream: %d %v", status, body)
	}
	if status, body = call(t, http.MethodGet, srv.URL+"/v1/history?stream=inbox:"+id+"&since=1&epoch=other", nil, tok); status != http.StatusOK || body["recovered"] != false {
		t.Fatalf("another epoch: %d %v", status, body)
	}
	for _, name := range []string{"user:" + id, "inbox:" + id} {
		if status, _ = call(t, http.MethodGet, srv.URL+"/v1/history?stream="+name, nil, otherTok); status != http.StatusForbidden {
			t.Fatalf("another user's %s: %d, want 403", name, status)
		}
	}
	for _, q := range []string{"stream=nope:x", "stream=room:%20x", "stream=user:42", "stream=inbox:42", "stream=room:a&limit=0", "stream=room:a&since=-1"} {
		if status, _ = call(t, http.MethodGet, srv.URL+"/v1/history?"+q, nil, tok); status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d, want 422", q, status)
		}
	}
	if status, body = call(t, http.MethodGet, srv.URL+"/v1/history?stream=room:empty", nil, tok); status != http.StatusOK || body["last_offset"] != 0.0 || body["recovered"] != true {
		t.Fatalf("an empty room: %d %v", status, body)
	}
}
