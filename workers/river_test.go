package workers

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/startstoptest"
	"github.com/switchboard/switchboard/jobs"
)

func TestRiverStartStop(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	newRiver := func(t *testing.T, work bool) *River {
		r, err := NewRiver(RiverOptions{Pool: pool, ClientID: uuid.NewString(), Logger: dbtest.Logger(t), Work: work,
			Workers: Options{DB: pool}, StopTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("Working", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(t *testing.T) startstop.Service { return newRiver(t, true) })
	})
	t.Run("WorkingParks", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(t *testing.T) startstop.Service {
			r, err := NewRiver(RiverOptions{Pool: pool, ClientID: uuid.NewString(), Logger: dbtest.Logger(t), Work: true,
				Workers: Options{DB: pool}, StopTimeout: 5 * time.Second, Park: ParkOptions{After: time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			// Told by turns that nothing is due and that work came:
			// parks and unparks race the Starts and Stops.
			go func() {
				for t.Context().Err() == nil {
					time.Sleep(2 * time.Millisecond)
					r.Outlook(nothingDue)
					time.Sleep(2 * time.Millisecond)
					r.Wake()
				}
			}()
			return r
		})
	})
	t.Run("InsertOnly", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(t *testing.T) startstop.Service { return newRiver(t, false) })
	})

	t.Run("DrainStopsTakingJobsAndStopTakesOver", func(t *testing.T) {
		t.Parallel()
		r := newRiver(t, true)
		r.Drain() // before Start: nothing to drain
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		r.Drain()
		r.Drain() // idempotent
		select {
		case <-r.Client().Stopped():
		case <-time.After(10 * time.Second):
			t.Fatal("a drained client still takes jobs")
		}
		r.Stop()
		r.Drain() // after Stop: nothing starts
	})
}

func TestCoordinatorStartStop(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	newQueue := func(t *testing.T, work bool, park time.Duration) *Coordinator {
		notices, err := NewNotices(t.Context(), pool, park > 0)
		if err != nil {
			t.Fatal(err)
		}
		q, err := NewCoordinator(CoordinatorOptions{
			River: RiverOptions{Pool: pool, ClientID: uuid.NewString(), Logger: dbtest.Logger(t), Work: work,
				Workers: Options{DB: pool}, StopTimeout: 5 * time.Second, Park: ParkOptions{After: park}},
			Claim:   jobs.ClaimerOptions{Pacing: jobs.Pacing{StartJitter: time.Millisecond}},
			Notices: notices,
		})
		if err != nil {
			t.Fatal(err)
		}
		// Rung by turns, as the bus rings them: the claim loop and River
		// are woken while Starts and Stops race.
		go func() {
			for t.Context().Err() == nil {
				for _, ring := range notices.Handlers() {
					time.Sleep(2 * time.Millisecond)
					ring()
				}
			}
		}()
		return q
	}
	t.Run("Worker", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(t *testing.T) startstop.Service { return newQueue(t, true, 0) })
	})
	t.Run("WorkerParks", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(t *testing.T) startstop.Service { return newQueue(t, true, time.Millisecond) })
	})
	t.Run("WebOnly", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(t *testing.T) startstop.Service { return newQueue(t, false, 0) })
	})
}
