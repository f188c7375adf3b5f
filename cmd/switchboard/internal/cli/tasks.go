package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

func (a *app) tasksCommand() *cobra.Command {
	c := group("tasks", "list, create, change and run tasks")
	c.AddCommand(a.taskListCommand(), a.taskGetCommand(), a.taskCreateCommand(), a.taskUpdateCommand(),
		a.taskActiveCommand("pause", false), a.taskActiveCommand("resume", true), a.taskDeleteCommand(),
		a.taskTriggerCommand(), a.taskBackfillCommand(), a.taskRotateCommand())
	return c
}

// pageFlags choose a page of a list, or every page with --all.
type pageFlags struct {
	limit  int
	cursor string
	all    bool
}

func (p *pageFlags) register(c *cobra.Command) {
	c.Flags().IntVar(&p.limit, "limit", 0, "items per page (1-100, default 50)")
	c.Flags().StringVar(&p.cursor, "cursor", "", "next_cursor of the previous page")
	c.Flags().BoolVar(&p.all, "all", false, "follow next_cursor to the last page")
}

// collect reads the page p chooses with fetch (o with p's limit and
// cursor), or every page from there with --all, and returns their items and
// the last page's next cursor.
func collect[T any](p pageFlags, o apiclient.ListOptions, fetch func(apiclient.ListOptions) ([]T, *string, error)) ([]T, *string, error) {
	o.Limit, o.Cursor = p.limit, p.cursor
	var items []T
	for {
		got, next, err := fetch(o)
		if err != nil {
			return nil, nil, err
		}
		items = append(items, got...)
		if !p.all || next == nil {
			return items, next, nil
		}
		o.Cursor = *next
	}
}

func (a *app) taskListCommand() *cobra.Command {
	var (
		page pageFlags
		kind string
	)
	c := &cobra.Command{Use: "list", Short: "list the project's tasks", Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			var all apiclient.TaskPage
			all.Items, all.NextCursor, err = collect(page, apiclient.ListOptions{Kind: kind}, func(o apiclient.ListOptions) ([]apiclient.Task, *string, error) {
				p, err := cl.Tasks(cmd.Context(), o)
				return p.Items, p.NextCursor, err
			})
			if err != nil {
				return err
			}
			return a.showPage(all, taskTable(all.Items), all.NextCursor)
		}}
	page.register(c)
	c.Flags().StringVar(&kind, "kind", "", "scheduled or on_demand")
	_ = c.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]cobra.Completion{"scheduled", "on_demand"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// showPage prints a page and, on a table, how to get the next one.
func (a *app) showPage(v any, t *table, next *string) error {
	if err := a.show(v, func() *table { return t }); err != nil {
		return err
	}
	if next != nil && a.output != "json" {
		fmt.Fprintf(a.io.Stderr, "more: --cursor %s (or --all)\n", *next)
	}
	return nil
}

func taskTable(tasks []apiclient.Task) *table {
	t := &table{head: []string{"ID", "NAME", "SCHEDULE", "ACTION", "ACTIVE", "NEXT RUN", "LAST RUN", "RUNS"}}
	for _, k := range tasks {
		t.add(k.ID, clip(k.Name, 30), schedule(k), clip(actionText(k.Action), 40), strconv.FormatBool(k.Active),
			when(k.NextRunAt), when(k.LastRunAt), strconv.FormatInt(k.RunCount, 10))
	}
	return t
}

func schedule(k apiclient.Task) string {
	if k.Schedule == nil {
		return "on demand"
	}
	return *k.Schedule + " " + k.Timezone
}

func actionText(ac apiclient.Action) string {
	if ac.Type == "webhook" {
		return "webhook " + ac.Method + " " + ac.URL
	}
	if ac.Room != "" {
		return "publish " + ac.Event + " to room " + ac.Room
	}
	return "publish " + ac.Event
}

// taskFields is one task as a two-column table.
func taskFields(k apiclient.Task) *table {
	t := fields("id", k.ID, "project", k.ProjectID, "name", k.Name, "schedule", schedule(k),
		"action", actionText(k.Action), "active", strconv.FormatBool(k.Active), "overlap", k.Overlap,
		"max concurrency", orDash(k.MaxConcurrency), "max attempts", strconv.Itoa(k.MaxAttempts),
		"timeout", strconv.Itoa(k.TimeoutSeconds)+"s", "priority", strconv.Itoa(k.Priority),
		"next run", when(k.NextRunAt), "last run", when(k.LastRunAt), "runs", strconv.FormatInt(k.RunCount, 10),
		"skipped ticks", strconv.FormatInt(k.SkippedTicks, 10), "created", when(&k.CreatedAt), "updated", when(&k.UpdatedAt))
	if k.PreviousSecretExpiresAt != nil {
		t.add("previous secret until", when(k.PreviousSecretExpiresAt))
	}
	if k.SigningSecret != "" {
		t.add("signing secret", k.SigningSecret+"  (shown only now)")
	}
	return t
}

// showTask prints one task.
func (a *app) showTask(k apiclient.Task) error {
	return a.show(k, func() *table { return taskFields(k) })
}

// withTask is a command on one task by id.
func (a *app) withTask(use, short string, run func(cmd *cobra.Command, cl *apiclient.Client, id string) error) *cobra.Command {
	return a.withID(use, short, "TASK_ID", a.completeTasks, run)
}

// withID is a command on one resource named by its id (the argument
// called arg, completed by complete): run gets the client and the id.
func (a *app) withID(use, short, arg string, complete cobra.CompletionFunc,
	run func(cmd *cobra.Command, cl *apiclient.Client, id string) error) *cobra.Command {
	return &cobra.Command{Use: use + " " + arg, Short: short, Args: args(arg),
		ValidArgsFunction: complete,
		RunE: func(cmd *cobra.Command, got []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			return run(cmd, cl, got[0])
		}}
}

func (a *app) taskGetCommand() *cobra.Command {
	return a.withTask("get", "show a task", func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
		k, err := cl.Task(cmd.Context(), id)
		if err != nil {
			return err
		}
		return a.showTask(k)
	})
}

func (a *app) taskCreateCommand() *cobra.Command {
	var tf taskFlags
	c := &cobra.Command{Use: "create [NAME]", Short: "create a task (its signing secret is shown once)",
		Args: cobra.MaximumNArgs(1),
		Example: "  switchboard tasks create nightly --schedule '0 3 * * *' --webhook https://example.com/hook\n" +
			"  switchboard tasks create ping --publish ping --payload '{\"n\":1}'\n" +
			"  switchboard tasks create --file task.json",
		RunE: func(cmd *cobra.Command, got []string) error {
			in, err := tf.create(cmd, first(got))
			if err != nil {
				return err
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			k, err := cl.CreateTask(cmd.Context(), in)
			if err != nil {
				return err
			}
			return a.showTask(k)
		}}
	tf.register(c.Flags(), true)
	return c
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func (a *app) taskUpdateCommand() *cobra.Command {
	var tf taskFlags
	c := a.withTask("update", "change the fields given of a task", func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
		p, err := tf.patch(cmd.Flags())
		if err != nil {
			return err
		}
		k, err := cl.UpdateTask(cmd.Context(), id, p)
		if err != nil {
			return err
		}
		return a.showTask(k)
	})
	tf.register(c.Flags(), false)
	return c
}

// taskActiveCommand pauses (active false) or resumes (true) a task.
func (a *app) taskActiveCommand(use string, active bool) *cobra.Command {
	short := map[bool]string{false: "stop a task's schedule (triggers still run)", true: "start a paused task's schedule again"}[active]
	return a.withTask(use, short, func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
		k, err := cl.UpdateTask(cmd.Context(), id, apiclient.TaskPatch{Active: &active})
		if err != nil {
			return err
		}
		return a.showTask(k)
	})
}

func (a *app) taskDeleteCommand() *cobra.Command {
	return a.withTask("delete", "delete a task and its runs", func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
		if err := cl.DeleteTask(cmd.Context(), id); err != nil {
			return err
		}
		a.say("deleted task %s", id)
		return nil
	})
}

func (a *app) taskTriggerCommand() *cobra.Command {
	var (
		in      apiclient.Trigger
		payload string
		runAt   string
	)
	c := a.withTask("trigger", "run a task now (or at --run-at)", func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
		var err error
		if in.Payload, err = jsonFlag("payload", payload); err != nil {
			return err
		}
		if in.RunAt, err = timeFlag("run-at", runAt); err != nil {
			return err
		}
		r, err := cl.TriggerTask(cmd.Context(), id, in)
		if err != nil {
			return err
		}
		return a.showRun(r)
	})
	f := c.Flags()
	f.StringVar(&payload, "payload", "", "this run's JSON input (webhook body or event payload)")
	f.StringVar(&runAt, "run-at", "", "RFC 3339 time to run at (at most 30 days ahead)")
	f.IntVar(&in.Priority, "priority", 0, "this run's priority, 1 (first) to 4")
	f.StringVar(&in.IdempotencyKey, "idempotency-key", "", "the same key within 24 h answers the first run instead of making another")
	return c
}

// timeFlag reads an RFC 3339 time; empty is none.
func timeFlag(name, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, usageError{fmt.Errorf("--%s %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", name, v)}
	}
	return &t, nil
}

func (a *app) taskBackfillCommand() *cobra.Command {
	var from, to string
	c := a.withTask("backfill", "run each tick of [--from, --to) that has no run", func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
		f, err := timeFlag("from", from)
		if err != nil {
			return err
		}
		t, err := timeFlag("to", to)
		if err != nil {
			return err
		}
		if f == nil || t == nil {
			return usageError{fmt.Errorf("backfill needs --from and --to")}
		}
		b, err := cl.BackfillTask(cmd.Context(), id, apiclient.Backfill{From: *f, To: *t})
		if err != nil {
			return err
		}
		if a.output != "json" {
			a.say("%d ticks in the range, %d runs made", b.Ticks, b.Created)
		}
		return a.show(b, func() *table { return runTable(b.Items) })
	})
	c.Flags().StringVar(&from, "from", "", "first instant (RFC 3339, inclusive)")
	c.Flags().StringVar(&to, "to", "", "end (RFC 3339, exclusive, not in the future)")
	return c
}

func (a *app) taskRotateCommand() *cobra.Command {
	var until string
	c := a.withTask("rotate-secret", "give a task a new signing secret; the old one signs too until --previous-expires-at (default 24 h)",
		func(cmd *cobra.Command, cl *apiclient.Client, id string) error {
			t, err := timeFlag("previous-expires-at", until)
			if err != nil {
				return err
			}
			k, err := cl.RotateSecret(cmd.Context(), id, apiclient.RotateSecret{PreviousExpiresAt: t})
			if err != nil {
				return err
			}
			return a.showTask(k)
		})
	c.Flags().StringVar(&until, "previous-expires-at", "", "RFC 3339 time until which the replaced secret still signs (at most 30 days; a past time: not at all)")
	return c
}

// readAll reads a body from stdin, at most 1 MiB.
func readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if len(b) > 1<<20 {
		return nil, fmt.Errorf("more than 1 MiB")
	}
	return b, err
}
