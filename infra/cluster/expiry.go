package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeadNodes lists the other nodes judged dead (silent for longer than
// ExpireAfter, as RescueDead judges them) and how long until the next
// live one would be, so a caller can look again just then rather than
// poll. Until this node has heartbeated without a break for ExpireAfter it
// judges no node dead (see mayRescue) and says when it may.
//
// While heartbeats succeed it answers from the last one, which read every
// other node's time left in its own statement: no round trip of its own.
// A node is then judged dead at the first heartbeat after its time is up
// (within HeartbeatEvery), and the caller is told to look again after the
// heartbeat following the next expiry. Without a recent heartbeat it asks
// the database.
func (c *Cluster) DeadNodes(ctx context.Context) ([]string, time.Duration, error) {
	if !c.mayRescue() {
		since := c.healthySince.Load()
		if since == 0 {
			return nil, c.opts.HeartbeatEvery, nil
		}
		return nil, time.Until(time.Unix(0, since).Add(c.opts.ExpireAfter)) + time.Millisecond, nil
	}
	if v := c.seen.Load(); v != nil {
		if age := time.Since(v.at); age < c.opts.HeartbeatEvery+c.opts.HeartbeatEvery/2 {
			return v.deadNodes(age, c.opts.HeartbeatEvery, c.opts.ExpireAfter)
		}
	}
	rows, err := c.opts.DB.Query(ctx, `
		SELECT id::text, (extract(epoch FROM heartbeat_at + make_interval(secs => $1) - clock_timestamp()) * 1000)::bigint
		FROM cluster_nodes WHERE id::text <> $2`, c.opts.ExpireAfter.Seconds(), c.opts.NodeID)
	if err != nil {
		return nil, 0, fmt.Errorf("list dead nodes: %w", err)
	}
	var dead []string
	next := c.opts.ExpireAfter // no other node: any that registers now lives at least this long
	var id string
	var leftMS int64
	_, err = pgx.ForEachRow(rows, []any{&id, &leftMS}, func() error {
		if left := time.Duration(leftMS) * time.Millisecond; left < 0 {
			dead = append(dead, id)
		} else {
			next = min(next, left)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list dead nodes: %w", err)
	}
	return dead, next, nil
}

// deadNodes is DeadNodes from a heartbeat's view, age old: the nodes it
// saw expired, and the wait until the heartbeat that first sees the next
// live one expired (beats come every beatEvery after the view's).
func (v *beatView) deadNodes(age, beatEvery, expire time.Duration) ([]string, time.Duration, error) {
	next := expire // no other node: any that registers now lives at least this long
	for _, o := range v.others {
		if o.left >= 0 {
			next = min(next, o.left)
		}
	}
	// The first beat after next (counted from the view), a little after it
	// has read the database.
	// (A beat that is late finds the caller looking again every tenth of
	// a beat, without a statement, until it comes.)
	beats := next/beatEvery + 1
	return expired(v.others), max(beats*beatEvery-age, 0) + beatEvery/10, nil
}
