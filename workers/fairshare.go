package workers

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/jobs"
)

// fairShare is a replica's share of its run workers between projects. It
// counts the jobs the replica runs per project; its River producer fetches
// through it (fairDriver, jobs.FairFetch), taking available jobs in turns
// across projects and leaving a reserve of free workers to projects within
// their share, so that a project's backlog of slow runs cannot hold every
// worker while another project's run waits.
type fairShare struct {
	river.MiddlewareDefaults
	share, reserve int
	fetch          fetchWatch // has River's producers fetch again; nil: their poll

	mu       sync.Mutex
	jobs     map[int64]string // running here → its project
	running  map[string]int   // per project
	withheld bool             // the last fetch left fetchable jobs
}

// ReserveShare is the share of a replica's run workers kept free for
// projects within their share: a twentieth, at least one.
const ReserveShare = 20

// newFairShare shares workers: a project may run share jobs at once on
// the replica whatever the others do (a fifth of the reserve, at least
// one), and more only while reserve workers stay free.
func newFairShare(workers int, fetch fetchWatch) *fairShare {
	reserve := max(1, workers/ReserveShare)
	return &fairShare{share: max(1, reserve/5), reserve: reserve, fetch: fetch,
		jobs: map[int64]string{}, running: map[string]int{}}
}

// params is River's fetch with the replica's running jobs.
func (s *fairShare) params(p *riverdriver.JobGetAvailableParams) jobs.FairFetchParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	running := make(map[string]int, len(s.running))
	for project, n := range s.running {
		running[project] = n
	}
	return jobs.FairFetchParams{JobGetAvailableParams: p, Running: running, Share: s.share, Reserve: s.reserve}
}

// took counts the jobs a fetch took in.
func (s *fairShare) took(fetched []*rivertype.JobRow, withheld bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.withheld = withheld
	for _, job := range fetched {
		project := jobs.JobProject(job)
		s.jobs[job.ID] = project
		s.running[project]++
	}
}

// done counts jobs out. A job that ends after a fetch withheld jobs has
// River's producers fetch again: its worker is free.
func (s *fairShare) done(ids ...int64) {
	s.mu.Lock()
	ended := false
	for _, id := range ids {
		project, ok := s.jobs[id]
		if !ok {
			continue
		}
		ended = true
		delete(s.jobs, id)
		if s.running[project]--; s.running[project] <= 0 {
			delete(s.running, project)
		}
	}
	refetch := ended && s.withheld && s.fetch != nil
	if refetch {
		s.withheld = false
	}
	s.mu.Unlock()
	if refetch {
		s.fetch.FetchableAt(time.Now())
	}
}

// Work counts the job out when it returns (River's work middleware).
func (s *fairShare) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	defer s.done(job.ID)
	return doInner(ctx)
}

// fairDriver is River's driver whose producers fetch through share.
type fairDriver struct {
	riverdriver.Driver[pgx.Tx]
	pool  *pgxpool.Pool
	share *fairShare
}

// GetExecutor is the driver's executor, fetching fairly.
func (d *fairDriver) GetExecutor() riverdriver.Executor {
	return &fairExecutor{Executor: d.Driver.GetExecutor(), pool: d.pool, share: d.share}
}

type fairExecutor struct {
	riverdriver.Executor
	pool  *pgxpool.Pool
	share *fairShare
}

// JobGetAvailable is River's fetch, fair between projects. A fetch of
// another schema or of chosen kinds, which a task-run client never makes,
// is River's own.
func (e *fairExecutor) JobGetAvailable(ctx context.Context, p *riverdriver.JobGetAvailableParams) (*riverdriver.JobGetAvailableResult, error) {
	if p.Schema != "" || p.Kind != nil {
		return e.Executor.JobGetAvailable(ctx, p)
	}
	res, withheld, err := jobs.FairFetch(ctx, e.pool, e.share.params(p))
	if err != nil {
		return nil, err
	}
	e.share.took(res.Jobs, withheld)
	return res, nil
}

// JobSetStateIfRunningMany records the jobs' outcomes (River's completer)
// and counts them out, should their work not have (a job whose row did not
// decode is failed without being worked).
func (e *fairExecutor) JobSetStateIfRunningMany(ctx context.Context, p *riverdriver.JobSetStateIfRunningManyParams) ([]*rivertype.JobRow, error) {
	e.share.done(p.ID...)
	return e.Executor.JobSetStateIfRunningMany(ctx, p)
}
