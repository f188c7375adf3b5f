package cli

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

func (a *app) runsCommand() *cobra.Command {
	c := group("runs", "list, inspect, cancel, retry and follow runs")
	c.AddCommand(a.runListCommand(), a.runGetCommand(), a.runActionCommand("cancel", "cancel a queued or running run", (*apiclient.Client).CancelRun),
		a.runActionCommand("retry", "run a failed or cancelled run again", (*apiclient.Client).RetryRun), a.runTailCommand())
	return c
}

func (a *app) runListCommand() *cobra.Command {
	var (
		page         pageFlags
		task, status string
	)
	c := &cobra.Command{Use: "list", Short: "list runs, newest first (--status failed: the dead letters)", Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			var all apiclient.RunPage
			all.Items, all.NextCursor, err = collect(page, apiclient.ListOptions{Status: status}, func(o apiclient.ListOptions) ([]apiclient.Run, *string, error) {
				p, err := cl.Runs(cmd.Context(), task, o)
				return p.Items, p.NextCursor, err
			})
			if err != nil {
				return err
			}
			return a.showPage(all, runTable(all.Items), all.NextCursor)
		}}
	page.register(c)
	c.Flags().StringVar(&task, "task", "", "only this task's runs")
	c.Flags().StringVar(&status, "status", "", "queued, running, succeeded, failed or cancelled")
	_ = c.RegisterFlagCompletionFunc("task", a.completeTasks)
	_ = c.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statuses, cobra.ShellCompDirectiveNoFileComp))
	return c
}

var statuses = []cobra.Completion{"queued", "running", "succeeded", "failed", "cancelled"}

func runTable(runs []apiclient.Run) *table {
	t := &table{head: []string{"ID", "TASK", "STATUS", "TRIGGER", "SCHEDULED FOR", "ATTEMPT", "DURATION", "HTTP", "ERROR"}}
	for _, r := range runs {
		t.add(r.ID, r.TaskID, r.Status, r.Trigger, when(&r.ScheduledFor), strconv.Itoa(r.Attempt),
			duration(r.DurationMS), orDash(r.HTTPStatus), clip(orDash(r.Error), 40))
	}
	return t
}

func duration(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return strconv.FormatInt(*ms, 10) + "ms"
}

func runFields(r apiclient.Run) *table {
	return fields("id", r.ID, "task", r.TaskID, "status", r.Status, "trigger", r.Trigger,
		"scheduled for", when(&r.ScheduledFor), "started", when(r.StartedAt), "finished", when(r.FinishedAt),
		"attempt", strconv.Itoa(r.Attempt), "next attempt", when(r.NextAttemptAt), "duration", duration(r.DurationMS),
		"http status", orDash(r.HTTPStatus), "error", orDash(r.Error), "response", clip(orDash(r.ResponseExcerpt), 200),
		"payload", clip(raw(r.Payload), 200), "output", clip(raw(r.Output), 200), "priority", strconv.Itoa(r.Priority),
		"retry of", orDash(r.RetryOf), "skipped ticks", strconv.FormatInt(r.SkippedTicks, 10), "created", when(&r.CreatedAt))
}

func (a *app) showRun(r apiclient.Run) error {
	return a.show(r, func() *table { return runFields(r) })
}

// withRun is a command on one run by id.
func (a *app) withRun(use, short string, run func(cmd *cobra.Command, cl *apiclient.Client, id string) error) *cobra.Command {
	return a.withID(use, short, "RUN_ID", a.completeRuns, run)
}

// runWithAttempts is a run and its attempts, as -o json prints it.
type runWithAttempts struct {
	apiclient.Run
	Attempts []apiclient.Attempt `json:"attempts"`
}

func (a *app) runGetCommand() *cobra.Command {
	var attempts bool
	c := a.withRun("get", "show a run (--attempts: and each attempt)", func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
		r, err := cl.Run(cmd.Context(), id)
		if err != nil || !attempts {
			return cmpErr(err, func() error { return a.showRun(r) })
		}
		l, err := cl.Attempts(cmd.Context(), id)
		if err != nil {
			return err
		}
		return a.show(runWithAttempts{Run: r, Attempts: l.Items}, func() *table { return attemptTable(runFields(r), l.Items) })
	})
	c.Flags().BoolVar(&attempts, "attempts", false, "list the run's attempts too")
	return c
}

// cmpErr is err, or next's when err is nil.
func cmpErr(err error, next func() error) error {
	if err != nil {
		return err
	}
	return next()
}

// attemptTable appends one row per attempt to a run's fields.
func attemptTable(t *table, attempts []apiclient.Attempt) *table {
	for _, at := range attempts {
		t.add("attempt "+strconv.Itoa(at.Attempt), at.Status+" "+duration(at.DurationMS)+" http "+orDash(at.HTTPStatus)+" "+clip(orDash(at.Error), 80))
	}
	return t
}

// runActionCommand is cancel or retry: a POST on a run that answers a run.
func (a *app) runActionCommand(use, short string, do func(*apiclient.Client, context.Context, string) (apiclient.Run, error)) *cobra.Command {
	return a.withRun(use, short, func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
		r, err := do(cl, cmd.Context(), id)
		if err != nil {
			return err
		}
		return a.showRun(r)
	})
}
