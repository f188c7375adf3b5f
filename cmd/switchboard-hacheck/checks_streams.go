package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// streamEvents is how many events the durable stream check publishes.
const streamEvents = 300

// streamPace is each of the two publishers' delay between events (about
// 25 events/s in all, under the per-user API rate).
const streamPace = 80 * time.Millisecond

// streamClientScript is the Node client, relative to the module root.
const streamClientScript = "clients/js/test/hacheck/stream-client.js"

// checkDurableStream: a clients/js RealtimeClient
// follows a fresh user's stream from one replica while the two others
// publish to that user; the replica holding its socket is killed with -9
// mid-stream (and started again), then PostgreSQL is restarted mid-stream.
// The client must end with every acknowledged event exactly once, at offsets
// increasing by 1, and nothing else.
func (h *harness) checkDurableStream(ctx context.Context) (figures, error) {
	var f figures
	if h.cl.pg == nil {
		return f, fmt.Errorf("DATABASE_URL given, its server is not ours to restart: %w", errSkip)
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	reader, pubr, err := h.streamUsers(ctx)
	if err != nil {
		return f, err
	}
	nc, err := h.startStreamClient(ctx, reader)
	if err != nil {
		return f, err
	}
	defer nc.stop()
	first, err := nc.waitOpen(ctx, 1, 15*time.Second)
	if err != nil {
		return f, fmt.Errorf("node client: %w", err)
	}
	victim := h.replicaByURL(first)
	if victim < 0 {
		return f, fmt.Errorf("node client opened on %s, not a replica", first)
	}
	f.add("victim", h.cl.replicas[victim].Name())

	began := time.Now()
	pub := newStreamPublisher(h, pubr, reader, victim)
	pubDone := make(chan struct{})
	go func() { defer close(pubDone); pub.run(ctx) }()

	errs := h.streamChaos(ctx, &f, nc, pub, victim)
	select {
	case <-pubDone:
	case <-ctx.Done():
		return f, errors.Join(append(errs, fmt.Errorf("publishing: %w", ctx.Err()))...)
	}
	acked := pub.ackedIDs()
	if _, err := nc.waitIDs(ctx, acked, 20*time.Second); err != nil {
		errs = append(errs, err)
	}
	f.add("stream_time", time.Since(began))
	errs = append(errs, verifyStream(&f, nc, pub, acked)...)
	return f, errors.Join(errs...)
}

// streamChaos kills the socket's replica once a quarter of the events are
// acknowledged, waits for the client to open elsewhere, starts the replica
// again, and restarts PostgreSQL once half are acknowledged.
func (h *harness) streamChaos(ctx context.Context, f *figures, nc *nodeClient, pub *streamPublisher, victim int) []error {
	var errs []error
	vr := h.cl.replicas[victim]
	if err := pub.waitAcked(ctx, streamEvents/4); err != nil {
		return []error{err}
	}
	before := pub.ackedIDs()
	killAt := time.Now()
	if err := vr.Kill(); err != nil {
		return []error{fmt.Errorf("kill %s: %w", vr.Name(), err)}
	}
	f.add("acked_before_kill", len(before))
	next, err := nc.waitOpen(ctx, 2, 15*time.Second)
	if err != nil {
		errs = append(errs, fmt.Errorf("after kill -9 of %s: %w", vr.Name(), err))
	} else {
		f.add("reopened_on", h.cl.replicas[max(0, h.replicaByURL(next))].Name())
		f.add("reconnect_after", time.Since(killAt))
		if h.replicaByURL(next) == victim {
			errs = append(errs, fmt.Errorf("the client reopened on the killed replica %s", vr.Name()))
		}
	}
	if _, err := nc.waitIDs(ctx, before, 15*time.Second); err != nil {
		errs = append(errs, fmt.Errorf("events acknowledged before the kill: %w", err))
	}
	if at, err := nc.waitEventAfter(ctx, killAt, 15*time.Second); err != nil {
		errs = append(errs, fmt.Errorf("after kill -9 of %s: %w", vr.Name(), err))
	} else {
		f.add("recovered_after_kill", at.Sub(killAt))
	}
	if err := vr.Start(); err != nil {
		return append(errs, fmt.Errorf("restart %s: %w", vr.Name(), err))
	}
	if err := vr.WaitReady(ctx, 60*time.Second); err != nil {
		return append(errs, fmt.Errorf("restart %s: %w", vr.Name(), err))
	}
	if err := pub.waitAcked(ctx, streamEvents/2); err != nil {
		return append(errs, err)
	}
	f.add("acked_before_pg_stop", len(pub.ackedIDs()))
	down := time.Now()
	if err := h.cl.stopPostgres(); err != nil {
		return append(errs, fmt.Errorf("stop postgres: %w", err))
	}
	sleepCtx(ctx, h.opts.profile.pgDown)
	if err := h.cl.restartPostgres(ctx); err != nil {
		return append(errs, fmt.Errorf("start postgres again: %w", err))
	}
	up := time.Now()
	f.add("pg_down", up.Sub(down))
	ready, err := h.waitAllReadiness(ctx, http.StatusOK, 30*time.Second)
	h.addOutage(window{from: down.Add(-tickPeriod), to: up.Add(ready + 2*time.Second)})
	if err != nil {
		errs = append(errs, err)
	}
	return errs
}

// verifyStream: every acknowledged event exactly once, offsets 1 apart on
// one stream in one epoch, no resets or gaps, nothing unknown.
func verifyStream(f *figures, nc *nodeClient, pub *streamPublisher, acked []string) []error {
	var errs []error
	evs, opens, notes := nc.snapshot()
	a := auditStream(evs, acked, pub.stream())
	if a.firstBad != "" {
		errs = append(errs, errors.New(a.firstBad))
	}
	f.add("events", streamEvents)
	f.add("acked", len(acked))
	f.add("post_retries", pub.retries())
	f.add("received", len(evs))
	f.add("dup", a.dup)
	f.add("missing", a.missing)
	f.add("unacked_received", a.unknown)
	f.add("reconnects", len(opens)-1)
	if len(acked) != streamEvents {
		errs = append(errs, fmt.Errorf("%d of %d events were never acknowledged: %v", streamEvents-len(acked), streamEvents, pub.lastError()))
	}
	if a.dup > 0 || a.missing > 0 || a.unknown > 0 {
		errs = append(errs, fmt.Errorf("dup=%d missing=%d unacknowledged=%d", a.dup, a.missing, a.unknown))
	}
	if a.badOffsets > 0 {
		errs = append(errs, fmt.Errorf("%d events out of offset order", a.badOffsets))
	}
	if len(notes) > 0 {
		errs = append(errs, fmt.Errorf("client reported %s", strings.Join(notes, "; ")))
	}
	return errs
}

// streamAudit is what a follower received, against what was acknowledged.
type streamAudit struct {
	dup, missing, unknown, badOffsets int
	firstBad                          string // the first event out of order
}

// auditStream counts, in evs (as the follower emitted them), events
// received twice, acknowledged events not received, events never
// acknowledged, and events not on want's stream at the offset after the
// previous one in the first one's epoch.
func auditStream(evs []streamEvent, acked []string, want string) streamAudit {
	var a streamAudit
	ackedSet := map[string]bool{}
	for _, id := range acked {
		ackedSet[id] = true
	}
	seen := map[string]int{}
	for i, e := range evs {
		seen[e.ID]++
		if seen[e.ID] > 1 {
			a.dup++
		}
		if !ackedSet[e.ID] {
			a.unknown++
		}
		if e.Stream != want || (i > 0 && (e.Offset != evs[i-1].Offset+1 || e.Epoch != evs[0].Epoch)) {
			if a.badOffsets == 0 {
				a.firstBad = fmt.Sprintf("event %d: stream %s offset %d epoch %s after offset %d", i, e.Stream, e.Offset, e.Epoch, offsetAt(evs, i-1))
			}
			a.badOffsets++
		}
	}
	for _, id := range acked {
		if seen[id] == 0 {
			a.missing++
		}
	}
	return a
}

func offsetAt(evs []streamEvent, i int) int64 {
	if i < 0 {
		return 0
	}
	return evs[i].Offset
}

// streamUsers registers the reader and the publisher for this check.
func (h *harness) streamUsers(ctx context.Context) (reader, publisher *user, err error) {
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	var us []*user
	for i, name := range []string{"streamreader", "streampub"} {
		u := &user{Email: name + "-" + suffix + "@hacheck.test", Password: "hacheck-password-" + name}
		var out struct {
			Token string `json:"token"`
			User  struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		if err := h.expect(ctx, i, http.MethodPost, "/v1/auth/register", "", map[string]string{"email": u.Email, "password": u.Password}, http.StatusCreated, &out); err != nil {
			return nil, nil, err
		}
		u.Token, u.ID = out.Token, out.User.ID
		us = append(us, u)
	}
	return us[0], us[1], nil
}

func (h *harness) replicaByURL(u string) int {
	for i, r := range h.cl.replicas {
		if strings.TrimRight(u, "/") == strings.TrimRight(r.URL(""), "/") {
			return i
		}
	}
	return -1
}

// streamEvent is one stored event the Node client emitted.
type streamEvent struct {
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Epoch  string `json:"epoch"`
	Event  string `json:"event"`
	ID     string `json:"id"`
	at     time.Time
}

// nodeClient is the running Node process and what it printed.
type nodeClient struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	exited chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every line
	events  []streamEvent
	opens   []string
	notes   []string // resets, gaps, unreadable lines
}

// startStreamClient runs clients/js/test/hacheck/stream-client.js as u.
// Node and clients/js's dependencies are required: their absence fails.
func (h *harness) startStreamClient(ctx context.Context, u *user) (*nodeClient, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not installed (Node.js 20 or later runs the clients/js client)")
	}
	root, err := moduleDir()
	if err != nil {
		return nil, err
	}
	script := filepath.Join(root, streamClientScript)
	if _, err := os.Stat(filepath.Join(root, "clients/js/node_modules/ws/package.json")); err != nil {
		return nil, fmt.Errorf("clients/js has no node_modules/ws: run `npm ci` in clients/js first (%v)", err)
	}
	var urls []string
	for _, r := range h.cl.replicas {
		urls = append(urls, r.URL(""))
	}
	nc := &nodeClient{changed: make(chan struct{}), exited: make(chan struct{})}
	nc.cmd = exec.CommandContext(ctx, node, script)
	nc.cmd.Dir = filepath.Dir(script)
	nc.cmd.Env = append(os.Environ(), "SB_REPLICAS="+strings.Join(urls, ","), "SB_TOKEN="+u.Token)
	nc.cmd.Stderr = &nc.stderr
	out, err := nc.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if nc.stdin, err = nc.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := nc.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node %s: %w", script, err)
	}
	go nc.read(out)
	return nc, nil
}

// moduleDir is the directory of the go.mod around the working directory.
func moduleDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the switchboard module (no go.mod above the working directory)")
		}
		dir = parent
	}
}

func (nc *nodeClient) read(r io.Reader) {
	defer close(nc.exited)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		nc.line(sc.Bytes())
	}
	_ = nc.cmd.Wait()
	nc.mu.Lock()
	close(nc.changed)
	nc.changed = make(chan struct{})
	nc.mu.Unlock()
}

func (nc *nodeClient) line(b []byte) {
	var l struct {
		Type string `json:"type"`
		URL  string `json:"url"`
		streamEvent
	}
	err := json.Unmarshal(b, &l)
	nc.mu.Lock()
	defer nc.mu.Unlock()
	switch {
	case err != nil:
		nc.notes = append(nc.notes, "unreadable line "+truncate(string(b), 120))
	case l.Type == "event":
		l.at = time.Now()
		nc.events = append(nc.events, l.streamEvent)
	case l.Type == "open":
		nc.opens = append(nc.opens, l.URL)
	case l.Type == "reset", l.Type == "gap":
		nc.notes = append(nc.notes, truncate(string(b), 200))
	}
	close(nc.changed)
	nc.changed = make(chan struct{})
}

// until waits until cond (called with nc.mu held) is true.
func (nc *nodeClient) until(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		nc.mu.Lock()
		ok, ch := cond(), nc.changed
		nc.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-nc.exited:
			nc.mu.Lock()
			ok = cond()
			nc.mu.Unlock()
			if ok {
				return nil
			}
			return fmt.Errorf("node client exited (%v) before %s; stderr: %s", nc.cmd.ProcessState, what, truncate(nc.stderr.String(), 300))
		case <-timer.C:
			return fmt.Errorf("no %s within %s", what, d)
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
	}
}

// waitOpen waits for the client's n-th socket and returns its replica URL.
func (nc *nodeClient) waitOpen(ctx context.Context, n int, d time.Duration) (string, error) {
	var u string
	err := nc.until(ctx, d, fmt.Sprintf("socket #%d", n), func() bool {
		if len(nc.opens) >= n {
			u = nc.opens[n-1]
			return true
		}
		return false
	})
	return u, err
}

// waitIDs waits until the client has emitted every id; it returns when the
// last of them arrived.
func (nc *nodeClient) waitIDs(ctx context.Context, ids []string, d time.Duration) (time.Time, error) {
	var last time.Time
	missing := len(ids)
	err := nc.until(ctx, d, fmt.Sprintf("delivery of %d acknowledged events", len(ids)), func() bool {
		at := map[string]time.Time{}
		for _, e := range nc.events {
			if _, ok := at[e.ID]; !ok {
				at[e.ID] = e.at
			}
		}
		missing, last = 0, time.Time{}
		for _, id := range ids {
			t, ok := at[id]
			if !ok {
				missing++
			} else if t.After(last) {
				last = t
			}
		}
		return missing == 0
	})
	if err != nil {
		return last, fmt.Errorf("%w (%d missing)", err, missing)
	}
	return last, nil
}

// waitEventAfter waits for the first event emitted after t (the stream
// flowing again) and returns when it arrived.
func (nc *nodeClient) waitEventAfter(ctx context.Context, t time.Time, d time.Duration) (time.Time, error) {
	var at time.Time
	err := nc.until(ctx, d, "event after "+t.Format("15:04:05.000"), func() bool {
		if n := len(nc.events); n > 0 && nc.events[n-1].at.After(t) {
			for _, e := range nc.events {
				if e.at.After(t) {
					at = e.at
					return true
				}
			}
		}
		return false
	})
	return at, err
}

func (nc *nodeClient) snapshot() ([]streamEvent, []string, []string) {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	return append([]streamEvent(nil), nc.events...), append([]string(nil), nc.opens...), append([]string(nil), nc.notes...)
}

// stop ends stdin (the client closes and exits), then kills it if needed.
func (nc *nodeClient) stop() {
	_ = nc.stdin.Close()
	select {
	case <-nc.exited:
	case <-time.After(5 * time.Second):
		_ = nc.cmd.Process.Kill()
		<-nc.exited
	}
}

// streamPublisher posts streamEvents events to one user through every
// replica but the victim, two at a time, each retried with the same
// Idempotency-Key until it is acknowledged (202).
type streamPublisher struct {
	h       *harness
	from    *user
	to      *user
	targets []int
	hc      *http.Client
	tag     string

	mu      sync.Mutex
	acked   []string
	nretry  int
	lastErr error
}

func newStreamPublisher(h *harness, from, to *user, victim int) *streamPublisher {
	p := &streamPublisher{h: h, from: from, to: to, hc: httpClient(""), tag: fmt.Sprintf("%d", time.Now().UnixNano())}
	for i := range h.cl.replicas {
		if i != victim {
			p.targets = append(p.targets, i)
		}
	}
	return p
}

func (p *streamPublisher) stream() string { return "inbox:" + p.to.ID }

func (p *streamPublisher) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for n := w; n < streamEvents && ctx.Err() == nil; n += 2 {
				p.publish(ctx, w, fmt.Sprintf("e%03d", n))
				sleepCtx(ctx, streamPace)
			}
		})
	}
	wg.Wait()
}

// publish retries one event for up to 30 s, moving to the next target
// replica after each failure, with backoff.
func (p *streamPublisher) publish(ctx context.Context, start int, id string) {
	body, _ := json.Marshal(map[string]any{"to": p.to.ID, "event": "hacheck.stream", "payload": map[string]string{"id": id}})
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		r := p.targets[(start+i)%len(p.targets)]
		status, err := p.post(ctx, r, id, body)
		if err == nil && status == http.StatusAccepted {
			p.mu.Lock()
			p.acked = append(p.acked, id)
			p.mu.Unlock()
			return
		}
		if err == nil {
			err = fmt.Errorf("status %d", status)
		}
		p.mu.Lock()
		p.nretry++
		p.lastErr = fmt.Errorf("event %s on r%d: %w", id, r+1, err)
		p.mu.Unlock()
		sleepCtx(ctx, backoff(i, 100*time.Millisecond, 2*time.Second))
	}
}

func (p *streamPublisher) post(ctx context.Context, r int, id string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.h.cl.replicas[r].URL("/v1/events"), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+p.from.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "hacheck-stream-"+p.tag+"-"+id)
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (p *streamPublisher) ackedIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.acked...)
}

func (p *streamPublisher) retries() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nretry
}

func (p *streamPublisher) lastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// waitAcked waits until at least n events are acknowledged.
func (p *streamPublisher) waitAcked(ctx context.Context, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(p.ackedIDs()) >= n {
			return nil
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return fmt.Errorf("only %d events acknowledged, waiting for %d (last error: %v)", len(p.ackedIDs()), n, p.lastError())
}
