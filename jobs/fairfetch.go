package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivershared/uniquestates"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/infra/db"
)

// The fair fetch shares a replica's run workers between projects: River's
// producers take available jobs in turns across projects (fairfetch.sql)
// rather than first in, first out, and keep a reserve of free workers that
// only a project within its share may take. The project is in each run
// job's metadata, set where runs are inserted (runInsertOpts).

// projectKey is the key of the project in a run job's metadata.
const projectKey = "project"

// projectMetadata is a run job's metadata naming its task's project.
func projectMetadata(project string) []byte {
	b, _ := json.Marshal(map[string]string{projectKey: project})
	return b
}

// JobProject is the project of a River job's run ("" for a job inserted
// without one, which fetches share as one project).
func JobProject(job *rivertype.JobRow) string {
	var m struct {
		Project string `json:"project"`
	}
	_ = json.Unmarshal(job.Metadata, &m)
	return m.Project
}

// FairFetchParams is one fetch: River's parameters and this replica's
// share of its workers.
type FairFetchParams struct {
	*riverdriver.JobGetAvailableParams
	// Running is how many jobs this replica runs per project.
	Running map[string]int
	// Share is how many jobs of one project a replica may run whatever
	// the reserve.
	Share int
	// Reserve is how many free workers a job beyond its project's share
	// must leave.
	Reserve int
}

// FairFetch locks up to MaxToLock available jobs of the queue, in turns
// across projects, and marks them running as River's own fetch does
// (fairfetch.sql). withheld reports that it took fewer jobs than it was
// asked for while more were fetchable (kept for the reserve, or locked by
// another fetch): River takes a short fetch for an empty queue and fetches
// again only when told.
func FairFetch(ctx context.Context, q db.DB, p FairFetchParams) (res *riverdriver.JobGetAvailableResult, withheld bool, err error) {
	projects, counts := make([]string, 0, len(p.Running)), make([]int, 0, len(p.Running))
	for project, n := range p.Running {
		projects, counts = append(projects, project), append(counts, n)
	}
	rows, err := q.Query(ctx, fairFetchSQL, p.Queue, p.Now, p.MaxToLock, p.ClientID, p.MaxAttemptedBy,
		projects, counts, p.Share, p.MaxToLock-p.Reserve)
	if err != nil {
		return nil, false, fmt.Errorf("fair fetch: %w", err)
	}
	res = &riverdriver.JobGetAvailableResult{}
	var f fetchedRow
	var fetchable int
	_, err = pgx.ForEachRow(rows, append(f.targets(), &fetchable), func() error {
		if f.id == nil {
			return nil
		}
		job, err := f.job()
		f = fetchedRow{}
		res.Jobs = append(res.Jobs, job)
		if err != nil {
			if res.DecodeErrors == nil {
				res.DecodeErrors = map[int64]error{}
			}
			res.DecodeErrors[job.ID] = err
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("fair fetch: %w", err)
	}
	return res, len(res.Jobs) < p.MaxToLock && fetchable > len(res.Jobs), nil
}

// fetchedRow is a job row as fairfetch.sql returns it (every column NULL
// in the one row of a fetch that took no job).
type fetchedRow struct {
	id                                           *int64
	args, metadata, uniqueKey                    []byte
	attempt, maxAttempts, priority               *int16
	attemptedAt, createdAt, finalizedAt, schedAt *time.Time
	attemptedBy, tags                            []string
	errors                                       [][]byte
	kind, queue, state                           *string
	uniqueStates                                 pgtype.Bits
}

func (f *fetchedRow) targets() []any {
	return []any{&f.id, &f.args, &f.attempt, &f.attemptedAt, &f.attemptedBy, &f.createdAt, &f.errors, &f.finalizedAt,
		&f.kind, &f.maxAttempts, &f.metadata, &f.priority, &f.queue, &f.state, &f.schedAt, &f.tags, &f.uniqueKey, &f.uniqueStates}
}

// job decodes the row as riverpgxv5 does (jobRowFromInternalPartial): a
// row is always returned; an attempt error that does not decode leaves
// Errors empty and is returned beside it.
func (f *fetchedRow) job() (*rivertype.JobRow, error) {
	var decodeErr error
	errs := make([]rivertype.AttemptError, len(f.errors))
	for i, raw := range f.errors {
		if err := riverdriver.UnmarshalAttemptError(raw, &errs[i]); err != nil {
			decodeErr, errs = fmt.Errorf("error unmarshaling `errors`: %w", err), nil
			break
		}
	}
	var uniqueStates byte
	if f.uniqueStates.Valid && len(f.uniqueStates.Bytes) > 0 {
		uniqueStates = f.uniqueStates.Bytes[0]
	}
	return &rivertype.JobRow{
		ID: *f.id, Attempt: max(int(*f.attempt), 0), AttemptedAt: utc(f.attemptedAt), AttemptedBy: f.attemptedBy,
		CreatedAt: f.createdAt.UTC(), EncodedArgs: f.args, Errors: errs, FinalizedAt: utc(f.finalizedAt), Kind: *f.kind,
		MaxAttempts: max(int(*f.maxAttempts), 0), Metadata: f.metadata, Priority: max(int(*f.priority), 0), Queue: *f.queue,
		ScheduledAt: f.schedAt.UTC(), State: rivertype.JobState(*f.state), Tags: f.tags, UniqueKey: f.uniqueKey,
		UniqueStates: uniquestates.UniqueBitmaskToStates(uniqueStates),
	}, decodeErr
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
