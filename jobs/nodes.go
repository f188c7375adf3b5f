package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/db"
)

// NodeJobs is the job queue as the cluster sees it: its RescueJobs and
// Work hooks. The queue's tables (River's, tasks, task_runs) are this
// package's; the cluster only knows which nodes are dead.
type NodeJobs struct {
	DB db.DB
	// NodeID is this node, named in the rescued jobs' errors.
	NodeID string
	Logger *slog.Logger
	// Announcer announces the rescued runs' new status (queued or failed);
	// nil announces nothing.
	Announcer *Announcer
	// Backlog reads the status's backlog section (shared with the metrics,
	// cached); nil reads it afresh on each status.
	Backlog *BacklogReader
}

// RescuedJob is a River job that was running on a node that stopped
// heartbeating and was made available again (or discarded, its attempts
// spent). State is the job's new state.
type RescuedJob struct {
	ID       int64
	Kind     string
	Args     []byte
	State    string
	DeadNode string
	Queue    string
}

// RescuedRun is a run whose job was running on a node that died: the
// cluster made the job available again, or discarded it (attempts spent).
type RescuedRun struct {
	RunID     string
	DeadNode  string
	Discarded bool
}

// Rescue makes the running jobs of deadNodes available again now (or
// discards those whose attempts are spent) and puts their task runs back
// to queued (or failed), in one transaction. It is cluster.Options.RescueJobs.
func (n NodeJobs) Rescue(ctx context.Context, deadNodes []string) (int, error) {
	tx, err := n.DB.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("rescue jobs: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rescued, err := rescueJobs(ctx, tx, deadNodes, n.NodeID)
	if err != nil || len(rescued) == 0 {
		return 0, err
	}
	runs, err := RunsRescued(ctx, tx, rescuedRuns(rescued))
	if err != nil {
		return 0, err
	}
	if err := notifyRescued(ctx, tx, rescued); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("rescue jobs: commit: %w", err)
	}
	logger := cmp.Or(n.Logger, slog.New(slog.DiscardHandler))
	for _, j := range rescued {
		logger.Warn("rescued a job of a dead node", "job_id", j.ID, "kind", j.Kind, "state", j.State, "dead_node", j.DeadNode)
	}
	// After the commit: a rolled-back rescue announced nothing.
	n.Announcer.Announce(context.WithoutCancel(ctx), runs...)
	return len(rescued), nil
}

// rescuedRuns are the task runs of the rescued task-run jobs.
func rescuedRuns(rescued []RescuedJob) []RescuedRun {
	var runs []RescuedRun
	for _, j := range rescued {
		var args RunArgs
		if j.Kind != args.Kind() || json.Unmarshal(j.Args, &args) != nil || args.RunID == "" {
			continue
		}
		runs = append(runs, RescuedRun{RunID: args.RunID, DeadNode: j.DeadNode, Discarded: j.State == "discarded"})
	}
	return runs
}

// notifyRescued sends River's insert notification (at commit) for each
// queue a rescued job became available in, as River's own insert does:
// the producers fetch them at once, rather than on their next poll, and a
// parked replica (workers.River) starts again to work them.
func notifyRescued(ctx context.Context, tx pgx.Tx, rescued []RescuedJob) error {
	var queues []string
	for _, j := range rescued {
		if j.State == "available" && !slices.Contains(queues, j.Queue) {
			queues = append(queues, j.Queue)
		}
	}
	if len(queues) == 0 {
		return nil
	}
	if err := notifyInsertQueues(ctx, tx, queues); err != nil {
		return fmt.Errorf("rescue jobs: notify: %w", err)
	}
	return nil
}

// Work reports the queue, the running jobs by node, the scheduler backlog
// and the scaler's figures for the cluster status. It is
// cluster.Options.Work.
func (n NodeJobs) Work(ctx context.Context) (cluster.Work, error) {
	var w cluster.Work
	var err error
	if w.Queue, err = queueCounts(ctx, n.DB); err != nil {
		return w, err
	}
	if w.RunningByNode, err = jobsRunningByNode(ctx, n.DB); err != nil {
		return w, err
	}
	if w.Scheduler, err = schedulerBacklog(ctx, n.DB); err != nil {
		return w, err
	}
	if n.Backlog != nil {
		w.Backlog, err = n.Backlog.Read(ctx)
	} else {
		w.Backlog, err = ReadBacklog(ctx, n.DB)
	}
	return w, err
}

// schedulerBacklog is DueStats as the status shows it: due tasks and how
// long the oldest has waited.
func schedulerBacklog(ctx context.Context, q db.DB) (cluster.SchedulerStatus, error) {
	due, next, err := DueStats(ctx, q)
	if err != nil {
		return cluster.SchedulerStatus{}, err
	}
	s := cluster.SchedulerStatus{DueTasks: int64(due)}
	if due > 0 {
		s.OldestDueAgeMS = max(-next, 0).Milliseconds()
	}
	return s, nil
}
