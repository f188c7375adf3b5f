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
func (c *Cluster) DeadNodes(ctx context.Context) ([]string, time.Duration, error) {
	if !c.mayRescue() {
		since := c.healthySince.Load()
		if since == 0 {
			return nil, c.opts.HeartbeatEvery, nil
		}
		return nil, time.Until(time.Unix(0, since).Add(c.opts.ExpireAfter)) + time.Millisecond, nil
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
