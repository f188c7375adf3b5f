package workers

import (
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/jobs"
)

func TestRiverTimeoutsOutlastTheLongestRun(t *testing.T) {
	t.Parallel()
	cfg, err := RiverConfig(Options{ClientID: "x", DB: dbtest.NewTx(t)})
	if err != nil {
		t.Fatal(err)
	}
	longest := time.Duration(jobs.MaxTimeoutSeconds) * time.Second
	if RunJobTimeout <= longest || cfg.RescueStuckJobsAfter <= RunJobTimeout || cfg.RescueStuckJobsAfter < cfg.JobTimeout {
		t.Fatalf("longest task %s, run job timeout %s, River's job timeout %s, rescue after %s",
			longest, RunJobTimeout, cfg.JobTimeout, cfg.RescueStuckJobsAfter)
	}
}
