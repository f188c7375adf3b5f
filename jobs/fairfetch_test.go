package jobs

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
)

// TestFairFetch: River's fetch, taking available jobs in turns across
// projects and keeping the reserve for projects within their share,
// claims jobs exactly as River's own fetch does.
func TestFairFetch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// insert queues n jobs of project, one after the other, of priority.
	insert := func(t *testing.T, b *testBundle, project string, n, priority int) []int64 {
		t.Helper()
		var ids []int64
		for i := range n {
			res, err := b.river.Insert(ctx, RunArgs{RunID: fmt.Sprintf("%s-%d-%d", project, priority, i), TaskID: "t"},
				runInsertOpts(project, 3, priority))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Job.ID)
		}
		return ids
	}
	fetch := func(t *testing.T, b *testBundle, maxToLock int, running map[string]int, share, reserve int) ([]*rivertype.JobRow, bool) {
		t.Helper()
		res, withheld, err := FairFetch(ctx, b.pool, FairFetchParams{
			JobGetAvailableParams: &riverdriver.JobGetAvailableParams{ClientID: "node-1", MaxAttemptedBy: 100, MaxToLock: maxToLock, Queue: river.QueueDefault},
			Running:               running, Share: share, Reserve: reserve,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.Jobs, withheld
	}
	perProject := func(jobs []*rivertype.JobRow) map[string]int {
		out := map[string]int{}
		for _, j := range jobs {
			out[JobProject(j)]++
		}
		return out
	}

	t.Run("in turns across projects, each in River's order", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := insert(t, b, "a", 5, 2)
		urgent := insert(t, b, "a", 1, 1)
		insert(t, b, "b", 1, 4)
		insert(t, b, "c", 1, 1)
		jobs, withheld := fetch(t, b, 4, nil, 100, 0)
		if got := perProject(jobs); got["a"] != 2 || got["b"] != 1 || got["c"] != 1 || withheld {
			t.Fatalf("fetched %v (withheld %v), want a:2 b:1 c:1", got, withheld)
		}
		var ids []int64
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if !slices.Contains(ids, urgent[0]) || !slices.Contains(ids, a[0]) || slices.Contains(ids, a[1]) {
			t.Fatalf("project a's jobs fetched %v; want its priority-1 job %d, then its first %d", ids, urgent[0], a[0])
		}
	})

	t.Run("the claim is River's", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insert(t, b, "a", 2, 1)
		before := time.Now()
		jobs, _ := fetch(t, b, 10, nil, 100, 0)
		if len(jobs) != 2 {
			t.Fatalf("fetched %d jobs, want 2", len(jobs))
		}
		for _, j := range jobs {
			if j.State != rivertype.JobStateRunning || j.Attempt != 1 || !slices.Equal(j.AttemptedBy, []string{"node-1"}) ||
				j.AttemptedAt == nil || j.AttemptedAt.Before(before.Add(-time.Second)) || j.MaxAttempts != 3 || j.Kind != runJobKind {
				t.Fatalf("fetched %+v", j)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM river_job WHERE state = 'running' AND attempt = 1`); n != 2 {
			t.Fatalf("%d jobs running in the table, want 2", n)
		}
		if again, _ := fetch(t, b, 10, nil, 100, 0); len(again) != 0 {
			t.Fatalf("a second fetch took %d running jobs", len(again))
		}
	})

	t.Run("beyond its share a project leaves the reserve", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insert(t, b, "a", 5, 1)
		jobs, withheld := fetch(t, b, 3, map[string]int{"a": 3}, 1, 1)
		if len(jobs) != 2 || !withheld {
			t.Fatalf("a alone, beyond its share, took %d of 3 free workers (withheld %v), want 2 and a reserve of 1", len(jobs), withheld)
		}
		insert(t, b, "b", 2, 4)
		jobs, withheld = fetch(t, b, 1, map[string]int{"a": 5}, 1, 1)
		if got := perProject(jobs); got["b"] != 1 || len(jobs) != 1 || withheld {
			t.Fatalf("the last free worker went to %v (withheld %v), want b's first job", got, withheld)
		}
		jobs, withheld = fetch(t, b, 1, map[string]int{"a": 5, "b": 1}, 1, 1)
		if len(jobs) != 0 || !withheld {
			t.Fatalf("with both beyond their share, the reserve went to %v", perProject(jobs))
		}
	})

	t.Run("jobs without a project and jobs not yet due", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		legacy, err := b.river.Insert(ctx, RunArgs{RunID: "old", TaskID: "t"}, &river.InsertOpts{MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		later := insert(t, b, "a", 1, 1)
		if _, err := b.pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() + interval '1 hour' WHERE id = $1`, later[0]); err != nil {
			t.Fatal(err)
		}
		jobs, _ := fetch(t, b, 10, nil, 100, 0)
		if len(jobs) != 1 || jobs[0].ID != legacy.Job.ID || JobProject(jobs[0]) != "" {
			t.Fatalf("fetched %v, want only the job without a project", jobs)
		}
	})
}
