package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

func (a *app) runTailCommand() *cobra.Command {
	var task string
	c := &cobra.Command{Use: "tail [RUN_ID...]", Short: "follow runs live (with RUN_IDs: until they finish)",
		Long: "Print each task.run.* event of the project as it happens, over the WebSocket.\n" +
			"A dropped connection is reopened and resumes where it stopped: no event is missed\n" +
			"or repeated. With RUN_IDs it ends once each has finished: exit 0 when all\n" +
			"succeeded, 4 when one failed or was cancelled. -o json prints one event per line.",
		ValidArgsFunction: a.completeRuns,
		RunE: func(cmd *cobra.Command, got []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			t := &tail{a: a, cl: cl, named: len(got) > 0, waiting: slices.Clone(got)}
			if task != "" { // checked, and spelled as events spell it
				k, err := cl.Task(cmd.Context(), task)
				if err != nil {
					return err
				}
				t.task = k.ID
			}
			err = cl.FollowRuns(cmd.Context(), apiclient.FollowOptions{Connected: t.connected, Dropped: t.dropped}, t.event)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return firstErr(err, t.failed)
		}}
	c.Flags().StringVar(&task, "task", "", "only this task's runs")
	_ = c.RegisterFlagCompletionFunc("task", a.completeTasks)
	return c
}

// firstErr is the first error that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// tail is one runs tail: its filter and the runs it waits for.
type tail struct {
	a       *app
	cl      *apiclient.Client
	task    string
	named   bool     // RUN_IDs were given: end once they finished
	waiting []string // of those, the ones not yet seen finished
	failed  error    // the first waited-for run that did not succeed
}

// connected reads each awaited run: one that finished before the socket
// opened sends no more events. The ones left are kept as the API spells
// their ids, as events do.
func (t *tail) connected(ctx context.Context) (bool, error) {
	var still []string
	for _, id := range t.waiting {
		r, err := t.cl.Run(ctx, id)
		if err != nil {
			return false, err
		}
		if !r.Finished() {
			still = append(still, r.ID)
			continue
		}
		t.print(apiclient.RunEvent{Event: "task.run." + r.Status, Run: r})
		t.ended(r)
	}
	t.waiting = still
	if !t.done() {
		fmt.Fprintln(t.a.io.Stderr, "switchboard: following run events")
	}
	return t.done(), nil
}

func (t *tail) event(ev apiclient.RunEvent) (bool, error) {
	if t.task != "" && ev.Run.TaskID != t.task {
		return false, nil
	}
	if t.named && !slices.Contains(t.waiting, ev.Run.ID) {
		return false, nil
	}
	t.print(ev)
	if ev.Run.Finished() {
		t.finish(ev.Run)
	}
	return t.done(), nil
}

// finish takes a finished run off the waiting list.
func (t *tail) finish(r apiclient.Run) {
	if i := slices.Index(t.waiting, r.ID); i >= 0 {
		t.waiting = slices.Delete(t.waiting, i, i+1)
		t.ended(r)
	}
}

// ended notes an awaited run's end: the first that did not succeed is the
// command's failure.
func (t *tail) ended(r apiclient.Run) {
	if r.Status != "succeeded" && t.failed == nil {
		t.failed = runFailedError{run: r}
	}
}

// done: every named run finished (never, when none were named).
func (t *tail) done() bool { return t.named && len(t.waiting) == 0 }

func (t *tail) dropped(err error, wait time.Duration) {
	fmt.Fprintf(t.a.io.Stderr, "switchboard: connection lost (%v); reconnecting in %s\n", err, wait.Round(time.Millisecond))
}

// print writes one event: a JSON line, or a line of text.
func (t *tail) print(ev apiclient.RunEvent) {
	if t.a.output == "json" {
		_ = t.a.printJSONLine(ev)
		return
	}
	r := ev.Run
	line := fmt.Sprintf("%s  %-20s run %s  task %s  attempt %d", time.Now().Format(time.TimeOnly), ev.Event, r.ID, r.TaskID, r.Attempt)
	if r.HTTPStatus != nil {
		line += fmt.Sprintf("  http %d", *r.HTTPStatus)
	}
	if r.DurationMS != nil {
		line += "  " + duration(r.DurationMS)
	}
	if r.Error != nil {
		line += "  error: " + clip(*r.Error, 120)
	}
	fmt.Fprintln(t.a.io.Stdout, line)
}
