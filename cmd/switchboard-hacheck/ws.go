package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// frame is docs/api.md's WebSocket frame, plus when we read it.
type frame struct {
	Event   string          `json:"event"`
	Room    string          `json:"room,omitempty"`
	To      string          `json:"to,omitempty"`
	From    string          `json:"from,omitempty"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	at      time.Time
}

// socket is a client connection that records every frame it reads.
type socket struct {
	replica int
	conn    *websocket.Conn
	wmu     sync.Mutex // one writer at a time

	mu     sync.Mutex
	frames []frame
	err    error // set when the connection ends
	ended  chan struct{}
}

// ticket asks replica r for a WebSocket ticket for u.
func (h *harness) ticket(ctx context.Context, u *user, r int) (string, error) {
	var out struct {
		Ticket string `json:"ticket"`
	}
	if err := h.expect(ctx, r, http.MethodPost, "/v1/ws/ticket", u.Token, struct{}{}, http.StatusCreated, &out); err != nil {
		return "", err
	}
	if out.Ticket == "" {
		return "", fmt.Errorf("ticket answer on r%d has no ticket", r+1)
	}
	return out.Ticket, nil
}

// dial upgrades on replica r with a ticket; status is the handshake's HTTP
// status (101 on success).
func (h *harness) dial(ctx context.Context, r int, ticket string) (*websocket.Conn, int, error) {
	u := "ws://" + h.cl.replicas[r].Addr() + "/v1/ws?ticket=" + url.QueryEscape(ticket)
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	conn, resp, err := d.DialContext(ctx, u, nil)
	status := 0
	if resp != nil {
		status = resp.StatusCode
		resp.Body.Close()
	}
	return conn, status, err
}

// openSocket gets a ticket from replica tr and connects on replica cr.
func (h *harness) openSocket(ctx context.Context, u *user, tr, cr int) (*socket, error) {
	t, err := h.ticket(ctx, u, tr)
	if err != nil {
		return nil, err
	}
	conn, status, err := h.dial(ctx, cr, t)
	if err != nil {
		return nil, fmt.Errorf("connect on r%d with a ticket from r%d: status %d: %w", cr+1, tr+1, status, err)
	}
	s := &socket{replica: cr, conn: conn, ended: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *socket) read() {
	defer close(s.ended)
	for {
		_, b, err := s.conn.ReadMessage()
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		var f frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		f.at = time.Now()
		s.mu.Lock()
		s.frames = append(s.frames, f)
		s.mu.Unlock()
	}
}

func (s *socket) send(f frame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return s.conn.WriteJSON(f)
}

// waitFor returns the first frame (already read or arriving within d) that
// matches.
func (s *socket) waitFor(ctx context.Context, d time.Duration, match func(frame) bool) (frame, error) {
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		for _, f := range s.frames {
			if match(f) {
				s.mu.Unlock()
				return f, nil
			}
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return frame{}, fmt.Errorf("socket on r%d closed: %w", s.replica+1, err)
		}
		if time.Now().After(deadline) {
			return frame{}, fmt.Errorf("socket on r%d: nothing matching within %s (got %s)", s.replica+1, d, s.summary())
		}
		select {
		case <-ctx.Done():
			return frame{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// count is how many frames read so far match.
func (s *socket) count(match func(frame) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.frames {
		if match(f) {
			n++
		}
	}
	return n
}

// waitEnded waits until the server side closes or the connection breaks.
func (s *socket) waitEnded(d time.Duration) bool {
	select {
	case <-s.ended:
		return true
	case <-time.After(d):
		return false
	}
}

// summary names the events read so far, for failure messages.
func (s *socket) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int{}
	for _, f := range s.frames {
		counts[f.Event]++
	}
	var parts []string
	for e, n := range counts {
		parts = append(parts, fmt.Sprintf("%s×%d", e, n))
	}
	if len(parts) == 0 {
		return "no frames"
	}
	return strings.Join(parts, ",")
}

func (s *socket) close() {
	_ = s.conn.Close()
}

// payloadField reads one string field of a frame's payload.
func payloadField(f frame, key string) string {
	var m map[string]any
	if json.Unmarshal(f.Payload, &m) != nil {
		return ""
	}
	v, _ := m[key].(string)
	return v
}
