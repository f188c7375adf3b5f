package main

import (
	"math/rand/v2"
	"time"

	sbcluster "github.com/switchboard/switchboard/infra/cluster"
)

// faultKind is one kind of fault the soak injects.
type faultKind string

const (
	faultKill          faultKind = "kill"             // kill -9 a replica, start it again
	faultStop          faultKind = "stop"             // SIGSTOP a replica past its heartbeat expiry, then SIGCONT
	faultPGRestart     faultKind = "pg_restart"       // stop PostgreSQL (fast), start it again
	faultTerminateLsn  faultKind = "terminate_listen" // pg_terminate_backend of every replica's LISTEN connection
	faultTerminatePool faultKind = "terminate_pool"   // pg_terminate_backend of one replica's pool connections
	faultCut           faultKind = "cut"              // cut one replica's database connections, restore them
)

// heartbeatExpiry is how long a node may be silent before the others take
// it for dead and rescue its running jobs.
const heartbeatExpiry = sbcluster.DefaultExpireAfter

// faultKinds in the order a fresh deck holds them.
var faultKinds = []faultKind{faultKill, faultStop, faultPGRestart, faultTerminateLsn, faultTerminatePool, faultCut}

// fault is one planned fault: what, on which replica (-1: none or all), for
// how long (the process stays dead, stopped or cut, or PostgreSQL stays
// down; 0 for the terminations), and how long to wait before it once the
// cluster has recovered from the previous one.
type fault struct {
	kind    faultKind
	replica int
	hold    time.Duration
	gap     time.Duration
}

// faultPlan draws the soak's faults from a seeded PRNG: the same seed gives
// the same sequence of kinds, replicas, hold times and gaps.
//
// Kinds come from a shuffled deck holding each kind once, reshuffled when
// empty, so every kind recurs within each six faults whatever the seed.
// Hold times: kill 1–4 s dead; stop heartbeatExpiry+3 s to +6 s (13–16 s,
// so the other nodes judge it dead and rescue its running jobs while it is
// stopped); pg_restart 1–4 s down; cut 3–8 s. The gap before each fault is
// 3–9 s after every replica is ready again. A cycle averages about 12 s
// with recovery, so a 10-minute soak injects 45–50 faults, 7–8 of each kind.
type faultPlan struct {
	rng      *rand.Rand
	replicas int
	deck     []faultKind
}

func newFaultPlan(seed uint64, replicas int) *faultPlan {
	return &faultPlan{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), replicas: replicas}
}

// next draws the next fault.
func (p *faultPlan) next() fault {
	if len(p.deck) == 0 {
		p.deck = append([]faultKind(nil), faultKinds...)
		p.rng.Shuffle(len(p.deck), func(i, j int) { p.deck[i], p.deck[j] = p.deck[j], p.deck[i] })
	}
	k := p.deck[0]
	p.deck = p.deck[1:]
	f := fault{kind: k, replica: p.rng.IntN(p.replicas), gap: p.between(3*time.Second, 9*time.Second)}
	switch k {
	case faultKill:
		f.hold = p.between(time.Second, 4*time.Second)
	case faultStop:
		f.hold = p.between(heartbeatExpiry+3*time.Second, heartbeatExpiry+6*time.Second)
	case faultPGRestart:
		f.hold, f.replica = p.between(time.Second, 4*time.Second), -1
	case faultCut:
		f.hold = p.between(3*time.Second, 8*time.Second)
	case faultTerminateLsn:
		f.replica = -1
	}
	return f
}

// between is a uniform duration in [lo, hi), to the millisecond.
func (p *faultPlan) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(p.rng.Int64N(int64((hi-lo)/time.Millisecond)))*time.Millisecond
}
