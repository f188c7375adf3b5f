package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// nodeExpiry is how long a silent node lives on (cluster.DefaultExpireAfter).
const nodeExpiry = 10 * time.Second

// checkPresenceKill: alice, bob and carol are in a room through sockets on
// one replica; kim watches the room from the two others. kill -9 that
// replica, and carol reconnects to another at once. Every watcher gets
// alice's and bob's presence.leave once, within the node expiry plus a
// second of the kill, and nothing about carol (neither a leave nor a second
// join). GET /v1/presence then agrees. The replica is started again.
func (h *harness) checkPresenceKill(ctx context.Context) (figures, error) {
	var f figures
	room := fmt.Sprintf("hacheck-presence-%d", time.Now().UnixNano()%1e9)
	victim := len(h.cl.replicas) - 1
	watchers, err := h.presenceWatchers(ctx, room, victim)
	defer closeAll(watchers)
	if err != nil {
		return f, err
	}
	held := []*user{h.users["alice"], h.users["bob"], h.users["carol"]}
	for _, u := range held {
		s, err := h.joinedSocket(ctx, u, victim, room)
		if err != nil {
			return f, err
		}
		defer s.close()
	}
	for _, u := range held {
		if err := waitPresence(ctx, watchers, "presence.join", room, u.ID, 10*time.Second); err != nil {
			return f, fmt.Errorf("before the kill: %w", err)
		}
	}

	// A node judges others dead only once its own heartbeats have succeeded
	// for a full expiry: on a cluster younger than that the leaves would
	// wait for the survivors, not for the victim's expiry.
	if wait := time.Until(h.readyAt.Add(nodeExpiry + 5*time.Second)); wait > 0 {
		h.progress("waiting %s: the survivors must have heartbeated for an expiry", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return f, ctx.Err()
		case <-time.After(wait):
		}
	}
	killAt := time.Now()
	if err := h.cl.replicas[victim].Kill(); err != nil {
		return f, err
	}
	carol, err := h.joinedSocket(ctx, h.users["carol"], 0, room) // reconnects elsewhere at once
	if err != nil {
		return f, fmt.Errorf("carol's reconnect: %w", err)
	}
	defer carol.close()
	f.add("carol_back", time.Since(killAt))

	errs := h.presenceLeaves(ctx, &f, watchers, room, killAt)
	errs = append(errs, h.presenceAfterKill(ctx, watchers, room)...)
	if err := h.restartRejoin(ctx, &f, victim, 0); err != nil {
		errs = append(errs, err)
	}
	return f, errors.Join(errs...)
}

// presenceWatchers are kim's sockets in room on every replica but skip.
func (h *harness) presenceWatchers(ctx context.Context, room string, skip int) ([]*socket, error) {
	var out []*socket
	for r := range h.cl.replicas {
		if r == skip {
			continue
		}
		s, err := h.joinedSocket(ctx, h.users["kim"], r, room)
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

func closeAll(socks []*socket) {
	for _, s := range socks {
		s.close()
	}
}

// joinedSocket opens u's socket on replica r and joins room.
func (h *harness) joinedSocket(ctx context.Context, u *user, r int, room string) (*socket, error) {
	s, err := h.openSocket(ctx, u, r, r)
	if err != nil {
		return nil, err
	}
	if err := s.send(frame{Event: "room.join", Room: room}); err != nil {
		s.close()
		return nil, err
	}
	if _, err := s.waitFor(ctx, 5*time.Second, func(fr frame) bool { return fr.Event == "room.joined" && fr.Room == room }); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func presenceOf(event, room, userID string) func(frame) bool {
	return func(fr frame) bool {
		return fr.Event == event && fr.Room == room && payloadField(fr, "user_id") == userID
	}
}

// waitPresence waits for event about userID at every watcher.
func waitPresence(ctx context.Context, watchers []*socket, event, room, userID string, d time.Duration) error {
	for _, w := range watchers {
		if _, err := w.waitFor(ctx, d, presenceOf(event, room, userID)); err != nil {
			return fmt.Errorf("%s of %s: %w", event, userID, err)
		}
	}
	return nil
}

// presenceLeaves: alice's and bob's leaves reach every watcher within the
// node expiry plus a second of the kill.
func (h *harness) presenceLeaves(ctx context.Context, f *figures, watchers []*socket, room string, killAt time.Time) []error {
	var errs []error
	bound := nodeExpiry + time.Second
	var slowest time.Duration
	for _, u := range []*user{h.users["alice"], h.users["bob"]} {
		for _, w := range watchers {
			fr, err := w.waitFor(ctx, time.Until(killAt.Add(bound)), presenceOf("presence.leave", room, u.ID))
			if err != nil {
				errs = append(errs, fmt.Errorf("no presence.leave of a killed replica's user within %s of the kill: %w", bound, err))
				continue
			}
			slowest = max(slowest, fr.at.Sub(killAt))
		}
	}
	f.add("leaves_after_kill", slowest)
	f.add("bound", bound)
	return errs
}

// presenceAfterKill: once a sentinel's join and leave (admin, on the
// first watcher's replica) reached every watcher, everything announced
// before has too: exactly one leave each of alice and bob, one join and
// no leave of carol; GET /v1/presence lists kim and carol only.
func (h *harness) presenceAfterKill(ctx context.Context, watchers []*socket, room string) []error {
	var errs []error
	admin := h.users["admin"]
	s, err := h.joinedSocket(ctx, admin, watchers[0].replica, room)
	if err != nil {
		return []error{fmt.Errorf("sentinel: %w", err)}
	}
	if err := waitPresence(ctx, watchers, "presence.join", room, admin.ID, 5*time.Second); err != nil {
		errs = append(errs, err)
	}
	s.close()
	if err := waitPresence(ctx, watchers, "presence.leave", room, admin.ID, 5*time.Second); err != nil {
		errs = append(errs, err)
	}
	want := []struct {
		event string
		u     *user
		n     int
	}{
		{"presence.leave", h.users["alice"], 1}, {"presence.leave", h.users["bob"], 1},
		{"presence.join", h.users["carol"], 1}, {"presence.leave", h.users["carol"], 0},
	}
	for _, w := range watchers {
		for _, c := range want {
			if n := w.count(presenceOf(c.event, room, c.u.ID)); n != c.n {
				errs = append(errs, fmt.Errorf("watcher on r%d got %d %s of %s, want %d", w.replica+1, n, c.event, c.u.Email, c.n))
			}
		}
	}
	return append(errs, h.presenceListing(ctx, room)...)
}

// presenceListing: GET /v1/presence agrees with the events.
func (h *harness) presenceListing(ctx context.Context, room string) []error {
	var out struct {
		Users []struct {
			UserID string `json:"user_id"`
		} `json:"users"`
		Degraded bool `json:"degraded"`
	}
	path := "/v1/presence?" + url.Values{"room": {room}}.Encode()
	if err := h.expect(ctx, 0, http.MethodGet, path, h.users["kim"].Token, nil, http.StatusOK, &out); err != nil {
		return []error{err}
	}
	got := map[string]bool{}
	for _, u := range out.Users {
		got[u.UserID] = true
	}
	if len(got) != 2 || !got[h.users["kim"].ID] || !got[h.users["carol"].ID] || out.Degraded {
		return []error{fmt.Errorf("GET /v1/presence after the kill lists %v (degraded %v), want kim and carol", out.Users, out.Degraded)}
	}
	return nil
}
