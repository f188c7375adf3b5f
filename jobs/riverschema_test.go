package jobs

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// recheck is what every failure of the River schema tests asks for.
const recheck = "\nRiver changed under jobs/riverschema.go: re-check each statement there (and jobs/backlog.sql) " +
	"against the new release's migrations and riverdriver queries, then update riverVersion and this test."

// TestRiverVersion pins the River release riverschema.go was checked
// against: an upgrade fails here until someone has looked. The versions
// are the build's (go list resolves go.mod, replacements included): a test
// binary's build info lists no dependencies.
func TestRiverVersion(t *testing.T) {
	t.Parallel()
	mods := []string{"github.com/riverqueue/river", "github.com/riverqueue/river/riverdriver",
		"github.com/riverqueue/river/riverdriver/riverpgxv5", "github.com/riverqueue/river/rivertype"}
	out, err := exec.Command("go", append([]string{"list", "-m", "-f", "{{.Path}} {{.Version}} {{.Replace}}"}, mods...)...).Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(mods) {
		t.Fatalf("go list -m: %q", out)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) != 3 || f[1] != riverVersion || f[2] != "<nil>" {
			t.Errorf("%s; riverschema.go was checked against River %s.%s", l, riverVersion, recheck)
		}
	}
}

// TestRiverSchema checks, on a database River's migrations made, what our
// statements rely on: the columns they read and write, the job states, and
// the indexes the queries are planned on.
func TestRiverSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	strs := func(sql string) []string {
		t.Helper()
		rows, err := tx.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	t.Run("columns", func(t *testing.T) {
		got := strs(`SELECT column_name || ' ' || udt_name FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'river_job'`)
		for _, want := range []string{"id int8", "args jsonb", "kind text", "state river_job_state", "queue text",
			"priority int2", "scheduled_at timestamptz", "finalized_at timestamptz", "attempt int2", "max_attempts int2",
			"attempted_by _text", "errors _jsonb"} {
			if !slices.Contains(got, want) {
				t.Errorf("river_job has no column %q (it has %v).%s", want, got, recheck)
			}
		}
	})

	t.Run("job states", func(t *testing.T) {
		// All of them, not only the ones named: a new state (a new way to
		// be finished, or to wait) changes what the reconcile and the
		// backlog must count.
		got := strs(`SELECT e.enumlabel::text FROM pg_enum e JOIN pg_type y ON y.oid = e.enumtypid
			WHERE y.typname = 'river_job_state' ORDER BY e.enumlabel`)
		want := []string{"available", "cancelled", "completed", "discarded", "pending", "retryable", "running", "scheduled"}
		if !slices.Equal(got, want) {
			t.Errorf("river_job_state is %v, want %v.%s", got, want, recheck)
		}
	})

	t.Run("indexes", func(t *testing.T) {
		got := strs(`SELECT regexp_replace(indexdef, ' ON \S+\.river_job ', ' ON river_job ') FROM pg_indexes
			WHERE schemaname = current_schema() AND tablename = 'river_job'`)
		for _, want := range []string{
			// runJobs, backlog.sql: index-only mins and counts by state.
			"CREATE INDEX river_job_prioritized_fetching_index ON river_job USING btree (state, queue, priority, scheduled_at, id)",
			// A run's jobs by args (cancel, reconcile, withdraw).
			"CREATE INDEX river_job_args_index ON river_job USING gin (args)",
			// fairfetch.sql: available jobs by project, in River's order.
			"CREATE INDEX river_job_project_fetching_index ON river_job USING btree (queue, COALESCE((metadata ->> 'project'::text), ''::text), priority, scheduled_at, id) WHERE (state = 'available'::river_job_state)",
			// The legacy maintenance jobs by kind.
			"CREATE INDEX river_job_kind ON river_job USING btree (kind)",
		} {
			if !slices.Contains(got, want) {
				t.Errorf("river_job lacks\n\t%s\nits indexes:\n\t%s%s", want, strings.Join(got, "\n\t"), recheck)
			}
		}
	})
}

// TestRiverInsertNotification: the notification we send on River's behalf
// goes where River's own insert sends its own, with a payload of the same
// shape.
func TestRiverInsertNotification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	channel, err := InsertChannel(ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	next := func(what string) map[string]any {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification on %s after %s: %v.%s", channel, what, err, recheck)
		}
		var payload map[string]any
		if err := json.Unmarshal([]byte(n.Payload), &payload); err != nil {
			t.Fatalf("%s: payload %q: %v", what, n.Payload, err)
		}
		return payload
	}
	if _, err := b.river.Insert(ctx, RunArgs{RunID: "r", TaskID: "t"}, runInsertOpts("", 1, 1)); err != nil {
		t.Fatal(err)
	}
	river := next("River's insert")
	if err := notifyInsertAt(ctx, b.pool, b.river.Schema(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if ours := next("our notification"); !mapsEqual(ours, river) {
		t.Fatalf("our payload %v, River's %v.%s", ours, river, recheck)
	}
}

func mapsEqual(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestRiverReadsWhatWeWrite: River reads the error our rescue appends as
// one of its AttemptErrors, and InsertAvailable changes the state River
// inserts a marked future job in, and only a marked one.
func TestRiverReadsWhatWeWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a rescued job's error", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := insertRunningJob(t, b.pool, `{"run_id":"x"}`, "dead", 1, 3)
		if _, err := rescueJobs(ctx, b.pool, []string{"dead"}, "rescuer"); err != nil {
			t.Fatal(err)
		}
		job, err := b.river.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(job.Errors) != 1 || job.Errors[0].Attempt != 1 || job.Errors[0].At.IsZero() ||
			!strings.Contains(job.Errors[0].Error, "rescued by node rescuer") || job.State != rivertype.JobStateAvailable {
			t.Fatalf("River reads the rescued job as %s with errors %+v.%s", job.State, job.Errors, recheck)
		}
	})

	t.Run("a future job inserted through InsertAvailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		client, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{Middleware: []rivertype.Middleware{&InsertAvailable{}}})
		if err != nil {
			t.Fatal(err)
		}
		opts := runInsertOpts("", 1, 1)
		opts.ScheduledAt = time.Now().Add(time.Hour)
		marked, mark := markInsertAvailable(ctx)
		for _, tc := range []struct {
			ctx  context.Context
			want rivertype.JobState
		}{{marked, rivertype.JobStateAvailable}, {ctx, rivertype.JobStateScheduled}} {
			res, err := client.Insert(tc.ctx, RunArgs{RunID: "r", TaskID: "t"}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Job.State != tc.want || !res.Job.ScheduledAt.Equal(opts.ScheduledAt.Truncate(time.Microsecond)) {
				t.Fatalf("inserted %s at %v, want %s at %v.%s", res.Job.State, res.Job.ScheduledAt, tc.want, opts.ScheduledAt, recheck)
			}
		}
		if !mark.kept {
			t.Fatal("the mark does not say the middleware ran")
		}
	})
}
