package main

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/realtime"
)

func TestDisconnectReachesSocketsOnEveryNode(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	tok, user := registerUser(t, servers[0], "kicked@example.com")
	otherTok, other := registerUser(t, servers[0], "stays@example.com")
	var socks []*sock
	for _, s := range servers {
		socks = append(socks, connect(t, s, tok))
		connected(t, s, user, 1)
	}
	socks = append(socks, connect(t, servers[2], tok))
	connected(t, servers[2], user, 2)
	bystander := connect(t, servers[1], otherTok)
	connected(t, servers[1], other, 1)

	status, body := call(t, http.MethodPost, servers[0].URL+"/v1/admin/users/"+user+"/disconnect", nil, admin)
	if status != http.StatusOK || body["closed"] != float64(4) || len(body["acked"].([]any)) != 3 || len(body["failed"].([]any)) != 0 {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	for i, s := range socks {
		<-s.done
		var ce *websocket.CloseError
		if !errors.As(s.err, &ce) || ce.Code != realtime.CloseDisconnected {
			t.Fatalf("socket %d ended with %v, want close %d", i, s.err, realtime.CloseDisconnected)
		}
	}
	select {
	case <-bystander.done:
		t.Fatalf("another user's socket was closed: %v", bystander.err)
	default:
	}
	if servers[1].rt.Hub.UserConnectionsLocal(other) != 1 {
		t.Fatal("another user's socket is gone")
	}
}

// joinRoom opens a socket on srv and joins room.
func joinRoom(t *testing.T, srv *testServer, token, room string) *sock {
	t.Helper()
	s := connect(t, srv, token)
	s.send(t, realtime.Frame{Event: "room.join", Room: room})
	s.expect(t, realtime.EventRoomJoined)
	return s
}

func TestPresenceAcrossNodes(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	aliceTok, alice := registerUser(t, servers[0], "alice@example.com")
	bobTok, bob := registerUser(t, servers[0], "bob@example.com")
	outsiderTok, _ := registerUser(t, servers[0], "outsider@example.com")
	makeRoom(t, servers[0], aliceTok, "lobby", "members")
	addMember(t, servers[0], aliceTok, "lobby", bob)
	joinRoom(t, servers[0], aliceTok, "lobby")
	joinRoom(t, servers[1], aliceTok, "lobby")
	joinRoom(t, servers[2], bobTok, "lobby")
	joinRoom(t, servers[2], outsiderTok, "elsewhere")

	users := func(body map[string]any) map[string]float64 {
		out := map[string]float64{}
		for _, u := range body["users"].([]any) {
			m := u.(map[string]any)
			out[m["user_id"].(string)] = m["connections"].(float64)
		}
		return out
	}
	testwait.For(t, 10*time.Second, "alice's 2 sockets and bob's 1 listed", func() bool {
		status, body := call(t, http.MethodGet, servers[2].URL+"/v1/presence?room=lobby", nil, aliceTok)
		got := users(body)
		return status == http.StatusOK && body["degraded"] == false && len(got) == 2 && got[alice] == 2 && got[bob] == 1
	})
	if status, body := call(t, http.MethodGet, servers[0].URL+"/v1/presence?room=lobby", nil, outsiderTok); status != http.StatusForbidden {
		t.Fatalf("outsider: %d %v", status, body)
	}
	if status, _ := call(t, http.MethodGet, servers[0].URL+"/v1/presence?room=lobby", nil, admin); status != http.StatusOK {
		t.Fatalf("admin: %d", status)
	}

	// A replica dies: its members stay listed, and the node named, until
	// it is judged dead; then they are gone.
	servers[1].crash()
	testwait.For(t, 15*time.Second, "the silent node named", func() bool {
		status, body := call(t, http.MethodGet, servers[0].URL+"/v1/presence?room=lobby", nil, bobTok)
		unavailable, _ := body["unavailable_nodes"].([]any)
		got := users(body)
		return status == http.StatusOK && body["degraded"] == true && slices.Equal(unavailable, []any{servers[1].nodeID}) && got[alice] == 2
	})
	testwait.For(t, 15*time.Second, "its members gone once it is judged dead", func() bool {
		status, body := call(t, http.MethodGet, servers[0].URL+"/v1/presence?room=lobby", nil, bobTok)
		got := users(body)
		return status == http.StatusOK && body["degraded"] == false && len(got) == 2 && got[alice] == 1 && got[bob] == 1
	})
}

func TestDrainedNodeRefusesSockets(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	tok, user := registerUser(t, servers[0], "drained@example.com")
	onTarget, onOther := connect(t, servers[1], tok), connect(t, servers[2], tok)
	connected(t, servers[1], user, 1)
	connected(t, servers[2], user, 1)

	status, body := call(t, http.MethodPost, servers[0].URL+"/v1/admin/nodes/"+servers[1].nodeID+"/drain", nil, admin)
	if status != http.StatusOK || body["acked"] != true {
		t.Fatalf("drain: %d %v", status, body)
	}
	onTarget.expect(t, realtime.EventDraining)
	_, res, err := websocket.DefaultDialer.Dial(wsURL(servers[1], issueTicket(t, servers[1], tok)), nil)
	if err == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("upgrade on the drained node: %v %v", err, res)
	}
	connect(t, servers[2], tok) // the others take sockets
	connected(t, servers[2], user, 2)
	select {
	case f := <-onOther.frames:
		t.Fatalf("a socket on another node got %+v", f)
	default:
	}
	_, body = call(t, http.MethodGet, servers[2].URL+"/v1/cluster/status", nil, admin)
	nodes := nodesOf(t, body)
	if nodes[servers[1].nodeID]["draining"] != true || nodes[servers[1].nodeID]["ws_connections"] != float64(1) ||
		nodes[servers[2].nodeID]["ws_connections"] != float64(2) {
		t.Fatalf("status: %v", body)
	}
}
