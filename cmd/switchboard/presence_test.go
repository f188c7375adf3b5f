package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime"
)

// watcher is a member's socket in a room that records the presence frames
// it receives, as "join <user>" and "leave <user>".
type watcher struct {
	*sock
	room string
	seen []string
}

func watch(t *testing.T, srv *testServer, token, room string) *watcher {
	t.Helper()
	return &watcher{sock: joinRoom(t, srv, token, room), room: room}
}

// until reads frames until cond holds over the presence frames seen.
func (w *watcher) until(t *testing.T, what string, cond func(seen []string) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !cond(w.seen) {
		select {
		case f := <-w.presence:
			w.record(t, f)
		case <-w.done:
			select {
			case f := <-w.presence: // read before the close
				w.record(t, f)
				continue
			default:
			}
			t.Fatalf("socket closed waiting for %s: %v (seen %v)", what, w.err, w.seen)
		case <-deadline:
			t.Fatalf("timed out waiting for %s; seen %v", what, w.seen)
		}
	}
}

func (w *watcher) record(t *testing.T, f realtime.Frame) {
	t.Helper()
	var verb string
	switch f.Event {
	case realtime.EventPresenceJoin:
		verb = "join"
	case realtime.EventPresenceLeave:
		verb = "leave"
	default:
		return
	}
	var p struct {
		UserID string `json:"user_id"`
	}
	if err := json.Unmarshal(f.Payload, &p); err != nil || f.Room != w.room || p.UserID == "" || f.ID == "" || f.Stream != "" {
		t.Fatalf("presence frame %+v (payload %s): %v", f, f.Payload, err)
	}
	w.seen = append(w.seen, verb+" "+p.UserID)
}

func has(want ...string) func([]string) bool {
	return func(seen []string) bool {
		for _, w := range want {
			if !slices.Contains(seen, w) {
				return false
			}
		}
		return true
	}
}

// settle makes a sentinel user join and leave the room and waits for both
// at every watcher: presence frames come in commit order, so every frame
// committed before the sentinel's join has then been seen.
func settle(t *testing.T, srv *testServer, room string, watchers ...*watcher) {
	t.Helper()
	tok, id := registerUser(t, srv, fmt.Sprintf("sentinel-%d@example.com", time.Now().UnixNano()))
	s := joinRoom(t, srv, tok, room)
	for _, w := range watchers {
		w.until(t, "the sentinel's join", has("join "+id))
	}
	_ = s.conn.Close()
	for _, w := range watchers {
		w.until(t, "the sentinel's leave", has("leave "+id))
	}
}

func count(seen []string, entry string) int {
	n := 0
	for _, s := range seen {
		if s == entry {
			n++
		}
	}
	return n
}

func presenceUsers(t *testing.T, srv *testServer, token, room string) (map[string]float64, map[string]any) {
	t.Helper()
	status, body := call(t, http.MethodGet, srv.URL+"/v1/presence?room="+room, nil, token)
	if status != http.StatusOK {
		t.Fatalf("presence: %d %v", status, body)
	}
	out := map[string]float64{}
	for _, u := range body["users"].([]any) {
		m := u.(map[string]any)
		out[m["user_id"].(string)] = m["connections"].(float64)
	}
	return out, body
}

// TestPresenceEventsAcrossReplicas: sockets of one user on three replicas
// are one member: every member, on every replica, hears exactly one join
// and one leave per user, and GET /v1/presence agrees.
func TestPresenceEventsAcrossReplicas(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 3)
	watchTok, watchID := registerUser(t, servers[0], "watcher@example.com")
	var watchers []*watcher
	for _, s := range servers {
		watchers = append(watchers, watch(t, s, watchTok, "lobby"))
	}
	aliceTok, alice := registerUser(t, servers[0], "alice@example.com")
	bobTok, bob := registerUser(t, servers[0], "bob@example.com")

	// Alice joins on every replica at once, bob on two.
	joined := make(chan *sock, 5)
	for _, j := range []struct {
		srv   *testServer
		token string
	}{{servers[0], aliceTok}, {servers[1], aliceTok}, {servers[2], aliceTok}, {servers[1], bobTok}, {servers[2], bobTok}} {
		go func() {
			s := connect(t, j.srv, j.token)
			s.send(t, realtime.Frame{Event: "room.join", Room: "lobby"})
			joined <- s
		}()
	}
	var socks []*sock
	for range 5 {
		s := <-joined
		s.expect(t, realtime.EventRoomJoined)
		socks = append(socks, s)
	}
	for _, w := range watchers {
		w.until(t, "alice's and bob's joins", has("join "+alice, "join "+bob))
	}
	testwait.For(t, 15*time.Second, "presence lists alice's 3 sockets and bob's 2", func() bool {
		users, body := presenceUsers(t, servers[1], watchTok, "lobby")
		return len(users) == 3 && users[alice] == 3 && users[bob] == 2 && users[watchID] == 3 && body["degraded"] == false
	})

	// They leave: by room.leave on some sockets, by closing the others.
	for i, s := range socks {
		if i%2 == 0 {
			s.send(t, realtime.Frame{Event: "room.leave", Room: "lobby"})
		} else {
			_ = s.conn.Close()
		}
	}
	for _, w := range watchers {
		w.until(t, "alice's and bob's leaves", has("leave "+alice, "leave "+bob))
	}
	settle(t, servers[0], "lobby", watchers...)
	for i, w := range watchers {
		for _, e := range []string{"join " + alice, "leave " + alice, "join " + bob, "leave " + bob} {
			if n := count(w.seen, e); n != 1 {
				t.Errorf("watcher on replica %d saw %q %d times: %v", i, e, n, w.seen)
			}
		}
		if n := count(w.seen, "leave "+watchID); n != 0 {
			t.Errorf("watcher on replica %d saw the watcher leave: %v", i, w.seen)
		}
	}
	if users, _ := presenceUsers(t, servers[2], watchTok, "lobby"); len(users) != 1 || users[watchID] != 3 {
		t.Fatalf("presence after the leaves: %v", users)
	}
}

// TestPresenceOfADeadNode: when a replica dies, a survivor announces the
// leaves of the users it held once it is judged dead, exactly once, and
// none for a user with a socket elsewhere or who reconnected elsewhere in
// the meantime (whose join is not announced either).
func TestPresenceOfADeadNode(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 3)
	watchTok, watchID := registerUser(t, servers[0], "watcher@example.com")
	watchers := []*watcher{watch(t, servers[0], watchTok, "lobby"), watch(t, servers[2], watchTok, "lobby")}
	users := map[string]string{}
	tokens := map[string]string{}
	for _, name := range []string{"alice", "bob", "carol", "dave"} {
		tokens[name], users[name] = registerUser(t, servers[0], name+"@example.com")
		joinRoom(t, servers[1], tokens[name], "lobby") // all on the replica that dies
	}
	joinRoom(t, servers[2], tokens["carol"], "lobby") // carol also elsewhere
	for _, w := range watchers {
		w.until(t, "the joins", has("join "+users["alice"], "join "+users["bob"], "join "+users["carol"], "join "+users["dave"]))
	}

	servers[1].crash()
	joinRoom(t, servers[0], tokens["dave"], "lobby") // dave reconnects elsewhere before it is judged dead
	for _, w := range watchers {
		w.until(t, "alice's and bob's leaves", has("leave "+users["alice"], "leave "+users["bob"]))
	}
	settle(t, servers[2], "lobby", watchers...)
	for i, w := range watchers {
		for _, e := range []string{"leave " + users["alice"], "leave " + users["bob"], "join " + users["dave"], "join " + users["carol"]} {
			if n := count(w.seen, e); n != 1 {
				t.Errorf("watcher %d saw %q %d times: %v", i, e, n, w.seen)
			}
		}
		for _, e := range []string{"leave " + users["carol"], "leave " + users["dave"], "leave " + watchID} {
			if n := count(w.seen, e); n != 0 {
				t.Errorf("watcher %d saw %q: %v", i, e, w.seen)
			}
		}
	}
	got, body := presenceUsers(t, servers[0], watchTok, "lobby")
	if len(got) != 3 || got[watchID] != 2 || got[users["carol"]] != 1 || got[users["dave"]] != 1 || body["degraded"] != false {
		t.Fatalf("presence after the node was judged dead: %v", body)
	}
	var left int
	if err := servers[0].pool.QueryRow(context.Background(), `SELECT count(*) FROM presence WHERE node_id = $1`, servers[1].nodeID).Scan(&left); err != nil || left != 0 {
		t.Fatalf("the dead node's rows: %d %v", left, err)
	}
}
