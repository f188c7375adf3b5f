package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Soak workload sizes.
const (
	soakCronTasks = 4                      // every-second tasks: two `* * * * * *`, two `@every 1s`
	soakODTasks   = 4                      // on-demand tasks the triggers share (each trigger locks its task row)
	soakEventPace = 200 * time.Millisecond // each of the two publishers' pause between events
	drainWithin   = 3 * time.Minute        // bound of the quiet drain at the end
)

// soakRun is one soak (-soak): the workload on the three replicas, the
// fault injector, and what the checker reads afterwards.
type soakRun struct {
	h      *harness
	seed   uint64
	db     *pgxpool.Pool
	target *soakTarget
	crons  []cronSpan
	od     []string
	trig   *triggers
	pub    *streamPublisher
	nc     *nodeClient
	inj    *injector
	ready  *readiness
	began  time.Time

	mu        sync.Mutex
	published []string // ids of the stream events whose publishing began
}

// runSoak runs the workload for the soak's duration while the injector
// breaks things, then drains, checks and reports. It reports whether no
// invariant was broken.
func (h *harness) runSoak(ctx context.Context) bool {
	fmt.Printf("soak  seed=%d duration=%s replicas=%d load_average=%s (reproduce the fault schedule with -seed %d)\n", h.opts.seed, h.opts.soak, replicaCount, loadAverage(), h.opts.seed)
	s, err := h.startSoak(ctx)
	if err != nil {
		h.report("soak setup", nil, err)
		if s != nil {
			s.close()
		}
		return false
	}
	defer s.close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.trig.run(ctx, stop) })
	wg.Go(func() { s.publish(ctx, stop) })
	wg.Go(func() { s.ready.run(ctx, stop) })
	s.began = time.Now()
	s.inj.run(ctx, s.began.Add(h.opts.soak))
	h.progress("faults over; quiet drain")
	vs := s.quiet(ctx)
	close(stop)
	wg.Wait()
	res, err := s.drainAndCheck(ctx)
	res.violations = append(vs, res.violations...)
	if err != nil {
		res.violations = append(res.violations, violate("check", "the check could not finish: %v", err))
	}
	s.print(res)
	fmt.Println("load_average " + loadAverage())
	return len(res.violations) == 0
}

// startSoak creates the tasks, starts the target and the JS follower.
func (h *harness) startSoak(ctx context.Context) (*soakRun, error) {
	if h.cl.pg == nil {
		return nil, errors.New("-soak restarts PostgreSQL: unset DATABASE_URL so the check starts its own")
	}
	s := &soakRun{h: h, seed: h.opts.seed}
	var err error
	if s.db, err = soakDB(ctx, h.cl.pgURL); err != nil {
		return s, err
	}
	if s.target, err = startSoakTarget(h.cl); err != nil {
		return s, err
	}
	if err := s.createTasks(ctx); err != nil {
		return s, err
	}
	s.trig = &triggers{h: h, owner: h.users["bob"], tasks: s.od, rng: rand.New(rand.NewPCG(s.seed, 1)), tag: fmt.Sprint(s.seed)}
	if err := s.startFollower(ctx); err != nil {
		return s, err
	}
	s.inj = &injector{h: h, db: s.db, plan: newFaultPlan(s.seed, replicaCount)}
	s.ready = newReadiness(h)
	return s, nil
}

// createTasks makes the every-second tasks (alice's) and the on-demand
// ones (bob's), all calling the target.
func (s *soakRun) createTasks(ctx context.Context) error {
	for i := range soakCronTasks {
		schedule := "* * * * * *"
		if i%2 == 1 {
			schedule = "@every 1s"
		}
		t, err := s.h.createTask(ctx, s.h.users["alice"], i%replicaCount, webhookTask(fmt.Sprintf("soak-cron-%d", i), schedule, s.target.url(fmt.Sprintf("/cron/%d", i))))
		if err != nil {
			return err
		}
		s.crons = append(s.crons, cronSpan{task: t.ID, created: t.CreatedAt})
	}
	for i := range soakODTasks {
		body := webhookTask(fmt.Sprintf("soak-od-%d", i), "", s.target.url(fmt.Sprintf("/od/%d", i)))
		delete(body, "schedule")
		t, err := s.h.createTask(ctx, s.h.users["bob"], i%replicaCount, body)
		if err != nil {
			return err
		}
		s.od = append(s.od, t.ID)
	}
	return nil
}

// startFollower starts the clients/js follower of a fresh user's stream
// and the publisher that posts to it.
func (s *soakRun) startFollower(ctx context.Context) error {
	reader, from, err := s.h.streamUsers(ctx)
	if err != nil {
		return err
	}
	if s.nc, err = s.h.startStreamClient(ctx, reader); err != nil {
		return err
	}
	if _, err := s.nc.waitOpen(ctx, 1, 15*time.Second); err != nil {
		return fmt.Errorf("node client: %w", err)
	}
	s.pub = newStreamPublisher(s.h, from, reader, -1)
	return nil
}

// publish posts stream events from two publishers until stop is closed.
func (s *soakRun) publish(ctx context.Context, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for n := w; ctx.Err() == nil; n += 2 {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("e%05d", n)
				s.mu.Lock()
				s.published = append(s.published, id)
				s.mu.Unlock()
				s.pub.publish(ctx, w, id)
				sleepCtx(ctx, soakEventPace)
			}
		})
	}
	wg.Wait()
}

// quiet makes sure, once the faults are over, that every replica runs and
// is ready; a replica that died by itself is a violation (and is started
// again, so the drain can finish).
func (s *soakRun) quiet(ctx context.Context) []violation {
	var vs []violation
	for i, r := range s.h.cl.replicas {
		if r.Running() {
			continue
		}
		vs = append(vs, violate("replica_exited", "%s exited by itself: %v", replicaName(i), r.ExitErr()))
		if err := r.Start(); err != nil {
			vs = append(vs, violate("replica_exited", "%s: start again: %v", replicaName(i), err))
		}
	}
	if _, err := s.h.waitAllReadiness(ctx, http.StatusOK, recoverWithin); err != nil {
		vs = append(vs, violate("not_ready", "after the faults: %v", err))
	}
	return vs
}

// loadAverage is the machine's 1, 5 and 15-minute load averages, as
// /proc/loadavg gives them ("?" elsewhere): a soak on a crowded machine
// runs its replicas and PostgreSQL short of CPU.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], "/")
	}
	return "?"
}

func (s *soakRun) close() {
	if s.nc != nil {
		s.nc.stop()
	}
	if s.target != nil {
		s.target.close()
	}
	if s.db != nil {
		s.db.Close()
	}
}
