package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// CallClient asks userID's client (a browser, over its socket) to run
// method and waits for its answer.
//
// The waiting node registers the call id and publishes rpc.call to the user;
// each node that holds one of the user's sockets remembers which node waits,
// and the first rpc.result from the client goes back over the bus to that
// node only. ErrNotConnected: the user has no socket anywhere (nobody
// answered "who holds user X" within FindUserTimeout). ErrRPCTimeout: no result
// within timeout. A late result is dropped.
func (b *Bus) CallClient(ctx context.Context, userID, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !b.holdsUser(userID) {
		found, err := b.findUser(ctx, userID)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, ErrNotConnected
		}
	}
	id := uuid.NewString()
	result := make(chan json.RawMessage, 1)
	b.mu.Lock()
	b.calls[id] = result
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.calls, id)
		b.mu.Unlock()
	}()
	payload, err := marshal(struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}{method, cmpRaw(params)})
	if err != nil {
		return nil, fmt.Errorf("rpc params: %w", err)
	}
	frame, err := encodeFrame(Event{Event: EventRPCCall, ID: id, Payload: payload}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("rpc frame: %w", err)
	}
	deadline, _ := ctx.Deadline()
	env := envelope{Kind: kindCall, User: userID, Call: id, Until: deadline.UnixMilli(), Frame: frame}
	b.dispatch(env)
	if err := b.send(ctx, env); err != nil {
		return nil, b.callErr(ctx, err)
	}
	select {
	case res := <-result:
		return res, nil
	case <-ctx.Done():
		return nil, b.callErr(ctx, ctx.Err())
	}
}

// callErr is ErrRPCTimeout when the call's own deadline passed.
func (b *Bus) callErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrRPCTimeout
	}
	return err
}

func cmpRaw(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

// findUser asks every node whether it holds a socket of userID and waits
// for the first "I do", at most FindUserTimeout.
func (b *Bus) findUser(ctx context.Context, userID string) (bool, error) {
	id := uuid.NewString()
	here := make(chan struct{}, 1)
	b.mu.Lock()
	b.searches[id] = here
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.searches, id)
		b.mu.Unlock()
	}()
	if err := b.send(ctx, envelope{Kind: kindFindUser, User: userID, Call: id}); err != nil {
		return false, b.callErr(ctx, err)
	}
	t := time.NewTimer(b.opts.FindUserTimeout)
	defer t.Stop()
	select {
	case <-here:
		return true, nil
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, b.callErr(ctx, ctx.Err())
	}
}

// routeResult sends a client's rpc result to the node that waits for it.
func (b *Bus) routeResult(node, callID string, payload json.RawMessage) {
	if node == b.opts.NodeID {
		b.resolveCall(callID, payload)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.send(ctx, envelope{Kind: kindResult, Node: node, Call: callID, Frame: cmpRaw(payload)}); err != nil {
		b.logger.Warn("rpc result not routed", "call_id", callID, "error", err)
	}
}

// resolveCall hands a result to the waiting caller; the first one wins and
// a late one is dropped.
func (b *Bus) resolveCall(callID string, payload json.RawMessage) {
	b.mu.Lock()
	ch, ok := b.calls[callID]
	delete(b.calls, callID)
	b.mu.Unlock()
	if ok {
		ch <- cmpRaw(payload)
	}
}

// userFound ends the search id: a node holds the user.
func (b *Bus) userFound(id string) {
	b.mu.Lock()
	ch, ok := b.searches[id]
	b.mu.Unlock()
	if ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// callRecord remembers an rpc.call delivered here, so the client's result
// goes back to the node that waits for it.
type callRecord struct {
	node, user string
	until      time.Time
}

// callRecords are the rpc.calls delivered to sockets here, by call id.
type callRecords struct {
	mu     sync.Mutex
	byID   map[string]callRecord
	forgot time.Time // when records past their deadline were last forgotten
}

// add remembers a call; every 10 s the records past their deadline are
// forgotten.
func (r *callRecords) add(id string, rec callRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.forgot) > 10*time.Second {
		for id, rec := range r.byID {
			if now.After(rec.until) {
				delete(r.byID, id)
			}
		}
		r.forgot = now
	}
	if r.byID == nil {
		r.byID = map[string]callRecord{}
	}
	r.byID[id] = rec
}

// take forgets and returns call id's record when user was called and its
// deadline has not passed; another user's answer leaves it in place.
func (r *callRecords) take(id, user string) (callRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.byID[id]
	ok = ok && rec.user == user && time.Now().Before(rec.until)
	if ok {
		delete(r.byID, id)
	}
	return rec, ok
}

// deliverCall writes an rpc.call frame to user's sockets, when any is here,
// and remembers which node waits for the answer.
func (h *Hub) deliverCall(user, callID, node string, until time.Time, frame []byte) {
	if !h.hasRecipients(user, "") {
		return
	}
	h.calls.add(callID, callRecord{node: node, user: user, until: until})
	h.deliver(user, "", frame)
}

// result routes a client's rpc.result to the waiting node. Only the called
// user may answer, once, before the deadline.
func (h *Hub) result(c *client, f Frame) error {
	if f.ID == "" {
		return errors.New(`rpc.result needs the "id" of the rpc.call it answers`)
	}
	rec, ok := h.calls.take(f.ID, c.user)
	if !ok {
		return fmt.Errorf("no pending rpc call %q for this user (it timed out or was answered)", f.ID)
	}
	h.bus.routeResult(rec.node, f.ID, f.Payload)
	return nil
}
