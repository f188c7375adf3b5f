// Package jobs owns the producer side of the job queue: job argument types,
// cron schedules, claiming due tasks and enqueueing runs. The web API
// enqueues through this package and never imports workers.
package jobs
