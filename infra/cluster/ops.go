package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/switchboard/switchboard/infra/db"
)

// NodeStatus is one node in the cluster status.
type NodeStatus struct {
	ID             string    `json:"id" format:"uuid"`
	Name           string    `json:"name"`
	Addr           string    `json:"addr" doc:"host:port the other nodes reach it at"`
	Roles          []string  `json:"roles"`
	Version        string    `json:"version"`
	StartedAt      time.Time `json:"started_at"`
	HeartbeatAgeMS int64     `json:"heartbeat_age_ms"`
	Reachable      bool      `json:"reachable" doc:"answered within the 500 ms budget"`
	Draining       bool      `json:"draining" doc:"as the node says, or as last recorded when unreachable"`
	WSConnections  int       `json:"ws_connections" doc:"open sockets; 0 when unreachable"`
	JobsRunning    int       `json:"jobs_running" doc:"River jobs this node fetched last and still running"`
	Error          string    `json:"error,omitempty" doc:"why the node is unreachable"`
}

// QueueCounts are River jobs by state.
type QueueCounts struct {
	Available int64 `json:"available"`
	Running   int64 `json:"running"`
	Scheduled int64 `json:"scheduled"`
	Retryable int64 `json:"retryable"`
	Discarded int64 `json:"discarded"`
}

// SchedulerStatus is the backlog of due tasks the claim loops have not
// claimed yet.
type SchedulerStatus struct {
	DueTasks       int64 `json:"due_tasks" doc:"active tasks whose next run is due"`
	OldestDueAgeMS int64 `json:"oldest_due_age_ms" doc:"how long the oldest due task has waited"`
}

// Backlog is what a worker-pool autoscaler needs, read in one query
// (jobs.ReadBacklog); the chart's KEDA trigger scales on Demand.
type Backlog struct {
	Demand                 int64   `json:"demand" doc:"available_jobs + scheduled_due_jobs + running_jobs + due_tasks: the work the worker pool has now, the figure the chart's KEDA trigger scales on"`
	AvailableJobs          int64   `json:"available_jobs" doc:"River jobs waiting for a worker"`
	ScheduledJobs          int64   `json:"scheduled_jobs" doc:"River jobs scheduled or waiting to retry, due or not"`
	ScheduledDueJobs       int64   `json:"scheduled_due_jobs" doc:"scheduled or retryable River jobs whose time has come (a worker makes them available)"`
	RunningJobs            int64   `json:"running_jobs" doc:"River jobs running now"`
	OldestAvailableAgeMS   int64   `json:"oldest_available_age_ms" doc:"how long the oldest ready job (available, or scheduled and due) has waited; 0 without one"`
	DueTasks               int64   `json:"due_tasks" doc:"active tasks whose next tick is due and not yet claimed"`
	OldestDueAgeMS         int64   `json:"oldest_due_age_ms" doc:"how long the oldest due tick has waited; 0 without one"`
	NotificationQueueUsage float64 `json:"notification_queue_usage" doc:"pg_notification_queue_usage(): the fraction (0 to 1) of PostgreSQL's NOTIFY queue in use"`
}

// Work is what Options.Work reports for the status: the job queue, the
// running jobs by the node that fetched them, the scheduler backlog and the
// scaler's figures.
type Work struct {
	Queue         QueueCounts
	RunningByNode map[string]int
	Scheduler     SchedulerStatus
	Backlog       Backlog
}

// Status is the whole cluster as one node sees it.
type Status struct {
	Nodes     []NodeStatus    `json:"nodes"`
	Queue     QueueCounts     `json:"queue"`
	Scheduler SchedulerStatus `json:"scheduler"`
	Backlog   Backlog         `json:"backlog" doc:"what a worker-pool autoscaler needs, from the database (read at most once a second per node)"`
	Degraded  bool            `json:"degraded" doc:"true when any node is unreachable"`
}

// nodes lists the registered nodes, with this one even when its row is
// missing (not yet registered, or reaped during a database outage).
func (c *Cluster) nodes(ctx context.Context) ([]Node, error) {
	nodes, err := nodeList(ctx, c.opts.DB)
	if err != nil {
		return nil, fmt.Errorf("read membership: %w", err)
	}
	if !slices.ContainsFunc(nodes, func(n Node) bool { return n.ID == c.opts.NodeID }) {
		nodes = append(nodes, c.self())
	}
	return nodes, nil
}

// Status asks every registered node for its local status (500 ms each,
// concurrently) and adds the queue and scheduler figures from the database.
// A node that does not answer is listed unreachable with worst-case values.
func (c *Cluster) Status(ctx context.Context) (Status, error) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("cluster status: %w", err)
	}
	var work Work
	workDone := make(chan error, 1)
	go func() {
		var err error
		if c.opts.Work != nil {
			work, err = c.opts.Work(ctx)
		}
		workDone <- err
	}()
	answers := gather(ctx, c, nodes, c.opts.StatusBudget, c.localStatus, func(ctx context.Context, n Node) (localStatus, error) {
		var ls localStatus
		err := c.callNode(ctx, "status", n, http.MethodGet, nodePath(n, "/status"), &ls)
		return ls, err
	})
	if err := <-workDone; err != nil {
		return Status{}, fmt.Errorf("cluster status: %w", err)
	}
	st := Status{Queue: work.Queue, Scheduler: work.Scheduler, Backlog: work.Backlog}
	st.Nodes = make([]NodeStatus, 0, len(answers))
	for _, a := range answers {
		ns := NodeStatus{ID: a.node.ID, Name: a.node.Name, Addr: a.node.Addr, Roles: a.node.Roles, Version: a.node.Version,
			StartedAt: a.node.StartedAt, HeartbeatAgeMS: a.node.HeartbeatAge.Milliseconds(), Reachable: a.err == nil,
			Draining: a.node.Draining, JobsRunning: work.RunningByNode[a.node.ID]}
		if a.err == nil {
			ns.Draining, ns.WSConnections = a.val.Draining, a.val.WSConnections
		} else {
			ns.Error = a.err.Error()
			st.Degraded = true
		}
		st.Nodes = append(st.Nodes, ns)
	}
	return st, nil
}

// ErrUnknownNode is a node id that is not registered.
var ErrUnknownNode = errors.New("no such node")

// Drain tells node id to drain. It returns ErrUnknownNode or a *CallError
// when the node did not ack.
func (c *Cluster) Drain(ctx context.Context, id string) error {
	if id == c.opts.NodeID {
		c.DrainLocal(ctx)
		return nil
	}
	if IsInternal(ctx) {
		return &CallError{Node: id, Err: errors.New("not forwarded: an internal call is answered locally")}
	}
	n, err := nodeByID(ctx, c.opts.DB, id)
	if errors.Is(err, db.ErrNotFound) {
		return ErrUnknownNode
	}
	if err != nil {
		return fmt.Errorf("drain node %s: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, ActionBudget)
	defer cancel()
	var ack drainAck
	if err := c.callNode(ctx, "drain", n, http.MethodPost, nodePath(n, "/drain"), &ack); err != nil {
		return fmt.Errorf("drain node %s: %w", id, err)
	}
	if !ack.Acked {
		return &CallError{Node: id, Err: fmt.Errorf("the node did not ack")}
	}
	return nil
}
