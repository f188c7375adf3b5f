package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/realtime"
)

// roomsURL is srv's URL of a room route: /v1/rooms/<name><rest>.
func roomsURL(srv *testServer, name, rest string) string {
	return srv.URL + "/v1/rooms/" + url.PathEscape(name) + rest
}

// makeRoom creates room through srv as token's user.
func makeRoom(t *testing.T, srv *testServer, token, name, visibility string) {
	t.Helper()
	status, body := call(t, http.MethodPost, srv.URL+"/v1/rooms", map[string]any{"name": name, "visibility": visibility}, token)
	if status != http.StatusCreated || body["name"] != name || body["visibility"] != visibility {
		t.Fatalf("create room %q: %d %v", name, status, body)
	}
}

func addMember(t *testing.T, srv *testServer, token, room, user string) {
	t.Helper()
	if status, body := call(t, http.MethodPut, roomsURL(srv, room, "/members/"+user), nil, token); status != http.StatusOK || body["user_id"] != user {
		t.Fatalf("add %s to %q: %d %v", user, room, status, body)
	}
}

// expectRefused checks that the next frame is an error with code.
func (s *sock) expectRefused(t *testing.T, code string) {
	t.Helper()
	f := s.expect(t, realtime.EventError)
	var p struct{ Code, Message string }
	if err := json.Unmarshal(f.Payload, &p); err != nil || p.Code != code {
		t.Fatalf("error frame %s, want code %q", f.Payload, code)
	}
}

// expectRemoved checks that a room.removed frame for room with reason
// arrives within one second.
func (s *sock) expectRemoved(t *testing.T, room, reason string, since time.Time) {
	t.Helper()
	select {
	case f := <-s.frames:
		var p struct{ Room, Reason string }
		if f.Event != realtime.EventRoomRemoved || f.Room != room || json.Unmarshal(f.Payload, &p) != nil || p.Room != room || p.Reason != reason {
			t.Fatalf("got %+v, want room.removed of %q (%s)", f, room, reason)
		}
	case <-time.After(time.Second - time.Since(since)):
		t.Fatalf("no room.removed of %q within 1 s", room)
	}
}

// requireRoomMarker proves that nothing of another room reached socks
// before a marker posted to room (which they joined) through srv: each
// node delivers room events in commit order.
func requireRoomMarker(t *testing.T, srv *testServer, token, room string, socks ...*sock) {
	t.Helper()
	if status, body := call(t, http.MethodPost, srv.URL+"/v1/events", map[string]any{"room": room, "event": "marker"}, token); status != http.StatusAccepted {
		t.Fatalf("marker: %d %v", status, body)
	}
	for i, s := range socks {
		if f := s.expect(t, "marker"); f.Room != room {
			t.Fatalf("socket %d: %+v before the marker", i, f)
		}
	}
}

func post(t *testing.T, srv *testServer, token, room, event string) int {
	t.Helper()
	status, _ := call(t, http.MethodPost, srv.URL+"/v1/events", map[string]any{"room": room, "event": event}, token)
	return status
}

func TestMembersOnlyRoomOnEveryReplica(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	ownerTok, _ := registerUser(t, servers[0], "vault-owner@example.com")
	memberTok, member := registerUser(t, servers[0], "vault-member@example.com")
	outTok, _ := registerUser(t, servers[0], "vault-outsider@example.com")
	makeRoom(t, servers[0], ownerTok, "vault", "members")
	addMember(t, servers[1], ownerTok, "vault", member)

	for i, srv := range servers {
		out := connect(t, srv, outTok)
		out.send(t, realtime.Frame{Event: "room.join", Room: "vault", ID: "j1"})
		out.expectRefused(t, realtime.CodeRoomForbidden)
		out.send(t, realtime.Frame{Event: "resume", Payload: json.RawMessage(`{"streams":{"room:vault":{"offset":0,"epoch":""}}}`)})
		if f := out.expect(t, realtime.EventRoomRemoved); f.Room != "vault" {
			t.Fatalf("replica %d: resume of a members-only room answered %+v", i, f)
		}
		out.expect(t, realtime.EventResumed)
		out.send(t, realtime.Frame{Event: "room.message", Room: "vault", Payload: json.RawMessage(`"x"`)})
		out.expect(t, realtime.EventError)
		out.send(t, realtime.Frame{Event: "typing", Room: "vault"})
		out.expect(t, realtime.EventError)
		if n := srv.rt.Hub.RoomMembersLocal("vault"); len(n) != 0 {
			t.Fatalf("replica %d: the outsider is in the room: %v", i, n)
		}
		for _, get := range []string{"/v1/history?stream=" + url.QueryEscape("room:vault"), "/v1/presence?room=vault", "/v1/rooms/vault", "/v1/rooms/vault/members"} {
			if status, body := call(t, http.MethodGet, srv.URL+get, nil, outTok); status != http.StatusForbidden {
				t.Fatalf("replica %d: outsider GET %s: %d %v", i, get, status, body)
			}
		}
		if status := post(t, srv, outTok, "vault", "x"); status != http.StatusForbidden {
			t.Fatalf("replica %d: outsider POST /v1/events: %d", i, status)
		}
		for _, who := range []string{memberTok, ownerTok, admin} {
			for _, get := range []string{"/v1/history?stream=" + url.QueryEscape("room:vault"), "/v1/presence?room=vault", "/v1/rooms/vault", "/v1/rooms/vault/members"} {
				if status, body := call(t, http.MethodGet, srv.URL+get, nil, who); status != http.StatusOK {
					t.Fatalf("replica %d: GET %s: %d %v", i, get, status, body)
				}
			}
		}
	}

	// A member joins and posts through any replica, by socket and HTTP.
	var socks []*sock
	for _, srv := range servers {
		socks = append(socks, joinRoom(t, srv, memberTok, "vault"))
	}
	// One after the other: a socket's frame is stored asynchronously, so
	// an HTTP post sent meanwhile could take the room's first offset.
	socks[0].send(t, realtime.Frame{Event: "room.message", Room: "vault", Payload: json.RawMessage(`"by socket"`)})
	for i, s := range socks {
		if f := s.expect(t, "room.message"); string(f.Payload) != `"by socket"` {
			t.Fatalf("socket %d: %+v", i, f)
		}
	}
	if status := post(t, servers[2], memberTok, "vault", "by.http"); status != http.StatusAccepted {
		t.Fatalf("member POST /v1/events: %d", status)
	}
	for _, s := range socks {
		s.expect(t, "by.http")
	}
	status, body := call(t, http.MethodGet, servers[1].URL+"/v1/history?stream="+url.QueryEscape("room:vault"), nil, memberTok)
	if events, _ := body["events"].([]any); status != http.StatusOK || len(events) != 2 {
		t.Fatalf("member history: %d %v", status, body)
	}

	// Only the owner or an admin manages the room.
	if status, _ := call(t, http.MethodPatch, roomsURL(servers[2], "vault", ""), map[string]any{"visibility": "open"}, memberTok); status != http.StatusForbidden {
		t.Fatalf("member PATCH: %d", status)
	}
	if status, _ := call(t, http.MethodPut, roomsURL(servers[2], "vault", "/members/"+member), nil, memberTok); status != http.StatusForbidden {
		t.Fatalf("member PUT: %d", status)
	}
	if status, _ := call(t, http.MethodPost, servers[1].URL+"/v1/rooms", map[string]any{"name": "vault", "visibility": "open"}, outTok); status != http.StatusConflict {
		t.Fatalf("second create: %d", status)
	}
}

func TestRemovedMemberIsEvictedOnEveryReplica(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 3)
	ownerTok, _ := registerUser(t, servers[0], "evict-owner@example.com")
	memberTok, member := registerUser(t, servers[0], "evict-member@example.com")
	makeRoom(t, servers[0], ownerTok, "vault", "members")
	addMember(t, servers[0], ownerTok, "vault", member)
	onB, onC := joinRoom(t, servers[1], memberTok, "vault"), joinRoom(t, servers[2], memberTok, "vault")
	for _, s := range []*sock{onB, onC} {
		s.send(t, realtime.Frame{Event: "room.join", Room: "lobby"})
		s.expect(t, realtime.EventRoomJoined)
	}
	owner := joinRoom(t, servers[0], ownerTok, "vault")
	if status := post(t, servers[0], ownerTok, "vault", "before"); status != http.StatusAccepted {
		t.Fatalf("post: %d", status)
	}
	for _, s := range []*sock{onB, onC, owner} {
		s.expect(t, "before")
	}

	if status, body := call(t, http.MethodDelete, roomsURL(servers[0], "vault", "/members/"+member), nil, ownerTok); status != http.StatusNoContent {
		t.Fatalf("remove: %d %v", status, body)
	}
	removed := time.Now() // committed
	// Posted at once after the removal, on every replica (the member's
	// own among them) and by socket, while the evictions travel.
	owner.send(t, realtime.Frame{Event: "room.message", Room: "vault", Payload: json.RawMessage(`"after"`)})
	var posts sync.WaitGroup
	for _, srv := range servers {
		posts.Go(func() {
			if status, _ := call(t, http.MethodPost, srv.URL+"/v1/events", map[string]any{"room": "vault", "event": "after"}, ownerTok); status != http.StatusAccepted {
				t.Errorf("post after: %d", status)
			}
		})
	}
	onB.expectRemoved(t, "vault", realtime.ReasonRemoved, removed)
	onC.expectRemoved(t, "vault", realtime.ReasonRemoved, removed)
	posts.Wait()
	for i, srv := range servers {
		if n := srv.rt.Hub.RoomMembersLocal("vault")[member]; n != 0 {
			t.Fatalf("replica %d still has the member's sockets in the room", i)
		}
	}
	requireRoomMarker(t, servers[1], ownerTok, "lobby", onB, onC)
	requireRoomMarker(t, servers[2], ownerTok, "lobby", onB, onC)

	onB.send(t, realtime.Frame{Event: "room.join", Room: "vault"})
	onB.expectRefused(t, realtime.CodeRoomForbidden)
	if status, _ := call(t, http.MethodGet, servers[2].URL+"/v1/history?stream="+url.QueryEscape("room:vault"), nil, memberTok); status != http.StatusForbidden {
		t.Fatalf("history after removal: %d", status)
	}
	if status, _ := call(t, http.MethodDelete, roomsURL(servers[1], "vault", "/members/"+member), nil, ownerTok); status != http.StatusNoContent {
		t.Fatalf("second remove: %d", status)
	}
}

func TestDeletedOrClosedRoomEvicts(t *testing.T) {
	t.Parallel()
	servers, _ := startCluster(t, 3)
	ownerTok, _ := registerUser(t, servers[0], "close-owner@example.com")
	memberTok, member := registerUser(t, servers[0], "close-member@example.com")
	guestTok, guest := registerUser(t, servers[0], "close-guest@example.com")
	makeRoom(t, servers[0], ownerTok, "agora", "open")
	addMember(t, servers[0], ownerTok, "agora", member)
	m, g := joinRoom(t, servers[1], memberTok, "agora"), joinRoom(t, servers[2], guestTok, "agora")
	if status := post(t, servers[0], ownerTok, "agora", "old"); status != http.StatusAccepted {
		t.Fatalf("post: %d", status)
	}
	m.expect(t, "old")
	g.expect(t, "old")

	// open -> members: the guest, not a member, is evicted; the member stays.
	closed := time.Now()
	if status, body := call(t, http.MethodPatch, roomsURL(servers[1], "agora", ""), map[string]any{"visibility": "members"}, ownerTok); status != http.StatusOK || body["visibility"] != "members" {
		t.Fatalf("patch: %d %v", status, body)
	}
	g.expectRemoved(t, "agora", realtime.ReasonRemoved, closed)
	if n := servers[2].rt.Hub.RoomMembersLocal("agora")[guest]; n != 0 {
		t.Fatal("the guest is still in the room")
	}
	if servers[1].rt.Hub.RoomMembersLocal("agora")[member] != 1 {
		t.Fatal("the member was evicted")
	}

	deleted := time.Now()
	if status, body := call(t, http.MethodDelete, roomsURL(servers[2], "agora", ""), nil, ownerTok); status != http.StatusNoContent {
		t.Fatalf("delete: %d %v", status, body)
	}
	m.expectRemoved(t, "agora", realtime.ReasonDeleted, deleted)
	if status, _ := call(t, http.MethodGet, roomsURL(servers[0], "agora", ""), nil, ownerTok); status != http.StatusNotFound {
		t.Fatalf("deleted room: %d", status)
	}
	// The name is an empty ad-hoc room now: its old history is gone.
	status, body := call(t, http.MethodGet, servers[0].URL+"/v1/history?stream="+url.QueryEscape("room:agora"), nil, guestTok)
	if events, _ := body["events"].([]any); status != http.StatusOK || len(events) != 0 {
		t.Fatalf("history of the deleted room: %d %v", status, body)
	}
}
