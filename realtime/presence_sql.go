package realtime

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// The presence table's queries (migration 00011), used by presence.go.

// presenceLockClass is the first key of presence's advisory locks (the
// second is a hash of the user and room), apart from other two-key locks.
const presenceLockClass = 0x70726573 // "pres"

// lockPresence takes the transaction locks of keys, in one order
// everywhere (sorted hashes), so two transactions never deadlock.
func lockPresence(ctx context.Context, tx pgx.Tx, keys []presenceKey) error {
	hashes := make([]int32, 0, len(keys))
	for _, k := range keys {
		h := fnv.New32a()
		_, _ = h.Write([]byte(k.user))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(k.room))
		hashes = append(hashes, int32(h.Sum32()))
	}
	slices.Sort(hashes)
	hashes = slices.Compact(hashes)
	// unnest yields the array in order, so the locks are taken in it.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, k) FROM unnest($2::int4[]) AS k`, int32(presenceLockClass), hashes); err != nil {
		return fmt.Errorf("lock presence: %w", err)
	}
	return nil
}

func splitKeys(keys []presenceKey) (rooms, users []string) {
	for _, k := range keys {
		rooms, users = append(rooms, k.room), append(users, k.user)
	}
	return rooms, users
}

// presenceSet upserts (count > 0) or deletes (0) node's rows for keys and
// returns the changes every member must hear of.
//
// Why NOT EXISTS sees the truth: it runs after the keys' locks were taken,
// in a snapshot that includes every other node's committed change to them,
// and it reads other nodes' rows only, which this statement does not touch.
func presenceSet(ctx context.Context, tx pgx.Tx, node string, keys []presenceKey, counts []int) ([]presenceChange, error) {
	rooms, users := splitKeys(keys)
	rows, err := tx.Query(ctx, `
		WITH input AS (
			SELECT r AS room, u::uuid AS user_id, n FROM unnest($2::text[], $3::text[], $4::int[]) AS t(r, u, n)
		), up AS (
			INSERT INTO presence AS p (room, user_id, node_id, connections)
			SELECT room, user_id, $1::uuid, n FROM input WHERE n > 0
			ON CONFLICT (room, user_id, node_id) DO UPDATE SET connections = EXCLUDED.connections
				WHERE p.connections <> EXCLUDED.connections
			RETURNING p.room, p.user_id, (xmax = 0) AS inserted
		), del AS (
			DELETE FROM presence p USING input i
			WHERE i.n = 0 AND p.room = i.room AND p.user_id = i.user_id AND p.node_id = $1::uuid
			RETURNING p.room, p.user_id
		), changed AS (
			SELECT room, user_id, true AS joined FROM up WHERE inserted
			UNION ALL
			SELECT room, user_id, false FROM del
		)
		SELECT c.room, c.user_id::text, c.joined FROM changed c
		WHERE NOT EXISTS (SELECT 1 FROM presence o WHERE o.room = c.room AND o.user_id = c.user_id AND o.node_id <> $1::uuid)`,
		node, rooms, users, counts)
	if err != nil {
		return nil, fmt.Errorf("write presence: %w", err)
	}
	return collectChanges(rows, "write presence")
}

func collectChanges(rows pgx.Rows, action string) ([]presenceChange, error) {
	changes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (presenceChange, error) {
		var c presenceChange
		return c, r.Scan(&c.room, &c.user, &c.joined)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	return changes, nil
}

// presenceKeysOf is every (room, user) nodes hold.
func presenceKeysOf(ctx context.Context, q db.DB, nodes []string) ([]presenceKey, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT room, user_id::text FROM presence WHERE node_id = ANY($1::uuid[])`, nodes)
	if err != nil {
		return nil, fmt.Errorf("read presence of nodes: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (presenceKey, error) {
		var k presenceKey
		return k, r.Scan(&k.room, &k.user)
	})
	if err != nil {
		return nil, fmt.Errorf("read presence of nodes: %w", err)
	}
	return keys, nil
}

// presenceDeleteNodes deletes nodes' rows of keys (those locked) and
// returns the leaves: users with no row left on any other node.
func presenceDeleteNodes(ctx context.Context, tx pgx.Tx, nodes []string, keys []presenceKey) ([]presenceChange, error) {
	rooms, users := splitKeys(keys)
	rows, err := tx.Query(ctx, `
		WITH input AS (
			SELECT r AS room, u::uuid AS user_id FROM unnest($2::text[], $3::text[]) AS t(r, u)
		), del AS (
			DELETE FROM presence p USING input i
			WHERE p.room = i.room AND p.user_id = i.user_id AND p.node_id = ANY($1::uuid[])
			RETURNING p.room, p.user_id
		)
		SELECT DISTINCT d.room, d.user_id::text, false FROM del d
		WHERE NOT EXISTS (SELECT 1 FROM presence o WHERE o.room = d.room AND o.user_id = d.user_id AND NOT o.node_id = ANY($1::uuid[]))`,
		nodes, rooms, users)
	if err != nil {
		return nil, fmt.Errorf("end presence of nodes: %w", err)
	}
	return collectChanges(rows, "end presence of nodes")
}

// presenceOfNode is node's rows: connections by (room, user).
func presenceOfNode(ctx context.Context, q db.DB, node string) (map[presenceKey]int, error) {
	rows, err := q.Query(ctx, `SELECT room, user_id::text, connections FROM presence WHERE node_id = $1::uuid`, node)
	if err != nil {
		return nil, fmt.Errorf("read this node's presence: %w", err)
	}
	defer rows.Close()
	out := map[presenceKey]int{}
	for rows.Next() {
		var k presenceKey
		var n int
		if err := rows.Scan(&k.room, &k.user, &n); err != nil {
			return nil, fmt.Errorf("read this node's presence: %w", err)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read this node's presence: %w", err)
	}
	return out, nil
}
