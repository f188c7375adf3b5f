package apiclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// RunEvent is a task.run.* event: its name, the run as it was then, and
// its place in the stream it was stored in.
type RunEvent struct {
	Event  string `json:"event"`
	Run    Run    `json:"run"`
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
}

// FollowOptions tune FollowRuns; the zero value is the default.
type FollowOptions struct {
	// Connected is called each time a socket is open and resumed, before
	// its events are read: the moment to read state the events may have
	// raced (a run that finished before the socket opened). Returning
	// true ends the follow.
	Connected func(ctx context.Context) (done bool, err error)
	// Dropped is told of each lost socket before the next attempt.
	Dropped func(err error, wait time.Duration)
	// MaxWait caps the wait between reconnection attempts; 0: 5 s.
	MaxWait time.Duration
}

// position is where a stream was read up to.
type position struct {
	Offset int64  `json:"offset"`
	Epoch  string `json:"epoch"`
}

// frame is a WebSocket frame as the server sends it.
type frame struct {
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
	Stream  string          `json:"stream"`
	Offset  int64           `json:"offset"`
	Epoch   string          `json:"epoch"`
}

// errDone ends a follow at the handler's request.
var errDone = errors.New("done")

// FollowRuns reads the task.run.* events of the streams the credential
// follows (its projects' and its own) and hands each to handle until
// handle or Connected says done, or ctx ends. A lost socket is reopened
// with a new ticket and resumes every stream from the last offset handled,
// so no stored event is missed or repeated; a refused ticket (a wrong key)
// ends it with that Problem.
func (c *Client) FollowRuns(ctx context.Context, o FollowOptions, handle func(RunEvent) (bool, error)) error {
	f := &follower{c: c, o: o, handle: handle, seen: map[string]position{}}
	wait := 100 * time.Millisecond
	for {
		opened, err := f.once(ctx)
		switch {
		case errors.Is(err, errDone):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case permanent(err):
			return err
		}
		if opened {
			wait = 100 * time.Millisecond
		}
		if o.Dropped != nil {
			o.Dropped(err, wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, cmp.Or(o.MaxWait, 5*time.Second))
	}
}

// permanent reports an error a new attempt will not cure: the API
// refused the credential or the request (4xx other than 408 and 429).
func permanent(err error) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status >= 400 && p.Status < 500 && p.Status != 408 && p.Status != 429
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// follower is one FollowRuns: its handler and the streams' positions.
type follower struct {
	c      *Client
	o      FollowOptions
	handle func(RunEvent) (bool, error)
	seen   map[string]position
}

// once opens one socket and reads it until it drops; opened reports that
// it got as far as reading.
func (f *follower) once(ctx context.Context) (opened bool, err error) {
	conn, err := f.dial(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := conn.WriteJSON(f.resume()); err != nil {
		return false, fmt.Errorf("send resume: %w", err)
	}
	if f.o.Connected != nil {
		if done, err := f.o.Connected(ctx); done || err != nil {
			return true, cmp.Or(err, errDone)
		}
	}
	return true, f.read(conn)
}

// dial gets a ticket and opens the socket with it.
func (f *follower) dial(ctx context.Context) (*websocket.Conn, error) {
	t, err := f.c.NewTicket(ctx)
	if err != nil {
		return nil, err
	}
	u, err := f.c.url(OpConnect.Path, url.Values{"ticket": {t.Ticket}})
	if err != nil {
		return nil, err
	}
	u = "ws" + strings.TrimPrefix(u, "http")
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: http.ProxyFromEnvironment}
	conn, res, err := d.DialContext(ctx, u, nil)
	if err != nil {
		if res != nil {
			return nil, fmt.Errorf("open the socket: %s", res.Status)
		}
		return nil, &NetworkError{Err: fmt.Errorf("open the socket: %w", err)}
	}
	return conn, nil
}

// resume asks for every stream from the last event handled; with none
// yet it starts delivery at once.
func (f *follower) resume() map[string]any {
	return map[string]any{"event": "resume", "payload": map[string]any{"streams": f.seen}}
}

// read hands the socket's run events to the handler until the socket
// drops or the handler is done. The server pings at least once a minute:
// silence past readIdle is a dead connection.
func (f *follower) read(conn *websocket.Conn) error {
	const readIdle = 90 * time.Second
	alive := func(string) error { return conn.SetReadDeadline(time.Now().Add(readIdle)) }
	conn.SetPingHandler(func(data string) error {
		_ = alive(data)
		return conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(5*time.Second))
	})
	for {
		_ = alive("")
		var fr frame
		if err := conn.ReadJSON(&fr); err != nil {
			return &NetworkError{Err: fmt.Errorf("read the socket: %w", err)}
		}
		if err := f.take(fr); err != nil {
			return err
		}
	}
}

// take handles one frame: a stored event is handled once (an offset at or
// before the stream's last is a repeat), then its position is kept.
func (f *follower) take(fr frame) error {
	if fr.Event == "server.draining" {
		return &NetworkError{Err: errors.New("the server is draining")}
	}
	if fr.Stream == "" {
		return nil
	}
	if p, ok := f.seen[fr.Stream]; ok && p.Epoch == fr.Epoch && fr.Offset <= p.Offset {
		return nil
	}
	if strings.HasPrefix(fr.Event, "task.run.") {
		ev := RunEvent{Event: fr.Event, Stream: fr.Stream, Offset: fr.Offset}
		if err := json.Unmarshal(fr.Payload, &ev.Run); err != nil {
			return fmt.Errorf("decode %s: %w", fr.Event, err)
		}
		if done, err := f.handle(ev); done || err != nil {
			return cmp.Or(err, errDone)
		}
	}
	f.seen[fr.Stream] = position{Offset: fr.Offset, Epoch: fr.Epoch}
	return nil
}
