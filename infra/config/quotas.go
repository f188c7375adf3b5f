package config

import (
	"fmt"

	"github.com/switchboard/switchboard/infra/quota"
)

// Quotas bound what one project may hold (docs/api.md "Quotas"): a create
// past one is refused, 409 for counts of things, 429 for runs not yet
// final, naming the quota. The defaults are quota.Defaults.
type Quotas struct {
	Tasks         int `envconfig:"SWITCHBOARD_QUOTA_TASKS" default:"1000" desc:"tasks one project may have (1-1000000); one more is refused with 409"`
	Rooms         int `envconfig:"SWITCHBOARD_QUOTA_ROOMS" default:"100" desc:"rooms one project may have created (1-1000000); one more is refused with 409"`
	APIKeys       int `envconfig:"SWITCHBOARD_QUOTA_API_KEYS" default:"100" desc:"API keys one project may have (1-1000); one more is refused with 409"`
	QueuedRuns    int `envconfig:"SWITCHBOARD_QUOTA_QUEUED_RUNS" default:"5000" desc:"runs of one project not yet final: queued, waiting for run_at or a retry, or running (1-1000000); a trigger, batch, retry or backfill past it is refused whole with 429"`
	BackfillTicks int `envconfig:"SWITCHBOARD_QUOTA_BACKFILL_TICKS" default:"1000" desc:"backfilled runs of one project not yet final (1-1000000); a backfill past it is refused whole with 429"`
}

// Limits are the quotas as the packages that enforce them take them.
func (q Quotas) Limits() quota.Limits {
	return quota.Limits{Tasks: q.Tasks, Rooms: q.Rooms, APIKeys: q.APIKeys, QueuedRuns: q.QueuedRuns, BackfillTicks: q.BackfillTicks}
}

// maxQuota bounds every quota setting; maxAPIKeysQuota the api_keys one (a
// project's keys are listed in one answer).
const (
	maxQuota        = 1_000_000
	maxAPIKeysQuota = 1000
)

func (q Quotas) validate() []error {
	var errs []error
	for _, s := range []struct {
		name     string
		v, limit int
	}{
		{"SWITCHBOARD_QUOTA_TASKS", q.Tasks, maxQuota}, {"SWITCHBOARD_QUOTA_ROOMS", q.Rooms, maxQuota},
		{"SWITCHBOARD_QUOTA_API_KEYS", q.APIKeys, maxAPIKeysQuota}, {"SWITCHBOARD_QUOTA_QUEUED_RUNS", q.QueuedRuns, maxQuota},
		{"SWITCHBOARD_QUOTA_BACKFILL_TICKS", q.BackfillTicks, maxQuota},
	} {
		if s.v < 0 || s.v > s.limit { // 0: the default
			errs = append(errs, fmt.Errorf("%s: %d is outside 1-%d", s.name, s.v, s.limit))
		}
	}
	return errs
}
