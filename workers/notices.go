package workers

import (
	"context"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/jobs"
)

// Notices are the job queue's NOTIFY channels that a worker replica's
// LISTEN connection (the realtime bus's) hears for its Coordinator:
// jobs.TasksChannel (a task made due sooner on any replica) wakes the
// claim loop, and River's insert notification (a job inserted or made
// fetchable on any replica) wakes a parked River. They are made before the
// connection, which takes Handlers, and handed to the Coordinator made
// after it, which answers them once it runs; each keeps one pending ring.
type Notices struct {
	insertChannel string // "": River's insert notification is not heard
	tasks         chan struct{}
	inserts       chan struct{}
}

// NewNotices makes a worker replica's notices: the task notice, and River's
// insert notification too when park (its River parks, and the
// notification wakes it); the insert channel's name is read from q's
// database (jobs.InsertChannel).
func NewNotices(ctx context.Context, q db.DB, park bool) (*Notices, error) {
	n := &Notices{tasks: make(chan struct{}, 1), inserts: make(chan struct{}, 1)}
	if !park {
		return n, nil
	}
	var err error
	if n.insertChannel, err = jobs.InsertChannel(ctx, q); err != nil {
		return nil, err
	}
	return n, nil
}

// Handlers are what the LISTEN connection calls per channel, when a
// notification arrives on it and when LISTEN is established or lost (one
// may have been missed). A nil *Notices has none.
func (n *Notices) Handlers() map[string]func() {
	if n == nil {
		return nil
	}
	h := map[string]func(){jobs.TasksChannel: func() { signal(n.tasks) }}
	if n.insertChannel != "" {
		h[n.insertChannel] = func() { signal(n.inserts) }
	}
	return h
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
