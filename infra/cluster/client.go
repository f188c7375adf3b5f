package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NewHTTPClient is the client a node calls the others with: pooled
// connections, a 1 s connect timeout, 5 s overall (callers set shorter
// budgets per call), no proxy from the environment, no redirects.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          64,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       60 * time.Second,
			ResponseHeaderTimeout: 5 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// CallError is a node that did not answer a call, or answered an error.
type CallError struct {
	Node    string
	Timeout bool
	Err     error
}

func (e *CallError) Error() string {
	if e.Timeout {
		return fmt.Sprintf("node %s did not answer in time: %v", e.Node, e.Err)
	}
	return fmt.Sprintf("node %s: %v", e.Node, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

type clusterMetrics struct {
	calls    *prometheus.CounterVec
	received *prometheus.CounterVec
	rescued  prometheus.Counter
	sent     atomic.Int64
	inbound  atomic.Int64
}

func newClusterMetrics(reg prometheus.Registerer) *clusterMetrics {
	m := &clusterMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_cluster_calls_total",
			Help: "Signed calls this node made to other nodes, by call and outcome (ok, error, timeout).",
		}, []string{"call", "outcome"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_cluster_calls_received_total",
			Help: "Signed internal calls this node served, by call.",
		}, []string{"call"}),
		rescued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_cluster_rescued_jobs_total",
			Help: "Running jobs of dead nodes made available again (or discarded) by this node.",
		}),
	}
	reg.MustRegister(m.calls, m.received, m.rescued)
	return m
}

// CallsSent and CallsReceived count signed node-to-node calls made and
// served by this node since it started.
func (c *Cluster) CallsSent() int64     { return c.metrics.sent.Load() }
func (c *Cluster) CallsReceived() int64 { return c.metrics.inbound.Load() }

// callNode sends a signed HTTP request to node n and decodes its JSON
// answer into out.
func (c *Cluster) callNode(ctx context.Context, name string, n Node, method, path string, out any) (err error) {
	c.metrics.sent.Add(1)
	defer func() { c.metrics.calls.WithLabelValues(name, outcome(err)).Inc() }()
	if n.Addr == "" {
		return &CallError{Node: n.ID, Err: errors.New("the node has no address")}
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.Addr+path, http.NoBody)
	if err != nil {
		return &CallError{Node: n.ID, Err: err}
	}
	Sign(req, c.opts.Secret, c.opts.NodeID, nil, time.Now())
	res, err := c.client.Do(req)
	if err != nil {
		return &CallError{Node: n.ID, Err: err, Timeout: isTimeout(err)}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return &CallError{Node: n.ID, Err: fmt.Errorf("read answer: %w", err), Timeout: isTimeout(err)}
	}
	if res.StatusCode/100 != 2 {
		return &CallError{Node: n.ID, Err: fmt.Errorf("answered %d: %s", res.StatusCode, trimDetail(body))}
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(out); err != nil {
		return &CallError{Node: n.ID, Err: fmt.Errorf("decode answer: %w", err)}
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func outcome(err error) string {
	var ce *CallError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ce) && ce.Timeout:
		return "timeout"
	}
	return "error"
}

// answer is one node's reply to a gathered call.
type answer[T any] struct {
	node Node
	val  T
	err  error
}

// gather asks every node concurrently, each within budget: this node
// in-process through local, the others through remote. A request that is
// itself a signed internal call only ever asks this node.
func gather[T any](ctx context.Context, c *Cluster, nodes []Node, budget time.Duration,
	local func() T, remote func(ctx context.Context, n Node) (T, error)) []answer[T] {
	out := make([]answer[T], len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		out[i].node = n
		if n.ID == c.opts.NodeID {
			out[i].val = local()
			continue
		}
		if IsInternal(ctx) {
			out[i].err = &CallError{Node: n.ID, Err: errors.New("not asked: an internal call is answered locally")}
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, budget)
			defer cancel()
			out[i].val, out[i].err = remote(cctx, n)
		})
	}
	wg.Wait()
	return out
}
