package cluster

import (
	"context"
	"time"
)

// DeadNodes lists the other nodes judged dead (silent for longer than
// ExpireAfter, as RescueDead judges them) and how long until the next
// live one would be, so a caller can look again just then rather than
// poll. Until this node has heartbeated without a break for ExpireAfter it
// judges no node dead (see mayRescue) and says when it may.
//
// While heartbeats succeed it answers from the last one, which read every
// other node's time left in its own statement: while every node beats, no
// round trip of its own. Only when a node's time, reckoned from that
// heartbeat, is up does it ask the database (the node may have beaten
// since): so a dead node is still judged at its expiry, to the
// millisecond, for one statement.
func (c *Cluster) DeadNodes(ctx context.Context) ([]string, time.Duration, error) {
	if !c.mayRescue() {
		since := c.healthySince.Load()
		if since == nil {
			return nil, c.opts.HeartbeatEvery, nil
		}
		return nil, time.Until(since.Add(c.opts.ExpireAfter)) + time.Millisecond, nil
	}
	if v := c.seen.Load(); v != nil {
		if next, ok := v.untilExpiry(time.Since(v.at), c.opts.ExpireAfter); ok {
			return nil, next, nil
		}
	}
	others, err := nodesLeft(ctx, c.opts.DB, c.opts.NodeID, c.opts.ExpireAfter)
	if err != nil {
		return nil, 0, err
	}
	next := c.opts.ExpireAfter // no other node: any that registers now lives at least this long
	for _, o := range others {
		if o.left >= 0 {
			next = min(next, o.left)
		}
	}
	return expired(others), next, nil
}

// untilExpiry is how long until the first other node's time is up,
// reckoned from the view, age old; ok is false when one's already is (or
// the view is older than any node's time).
func (v *beatView) untilExpiry(age, expire time.Duration) (next time.Duration, ok bool) {
	if age >= expire {
		return 0, false
	}
	next = expire - age // no other node: any that registers now lives at least this long
	for _, o := range v.others {
		left := o.left - age
		if left < 0 {
			return 0, false
		}
		next = min(next, left)
	}
	return next + time.Millisecond, true
}
