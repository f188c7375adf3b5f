package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Node is a registered process as cluster_nodes holds it.
type Node struct {
	ID           string
	Name         string
	Addr         string
	Roles        []string
	Version      string
	StartedAt    time.Time
	HeartbeatAge time.Duration
	Draining     bool
}

// upsertSQL registers the node ($1–$7: id, name, addr, roles, version,
// started_at, draining) or refreshes its heartbeat. An upsert rather than
// an update: a node whose row was reaped (a long pause, a database outage)
// registers itself again on its next beat.
const upsertSQL = `
		INSERT INTO cluster_nodes (id, name, addr, roles, version, started_at, heartbeat_at, draining)
		VALUES ($1, $2, $3, $4, $5, $6, now(), $7)
		ON CONFLICT (id) DO UPDATE
		SET addr = EXCLUDED.addr, heartbeat_at = now(), draining = EXCLUDED.draining`

// othersLeftSQL reads every node but self with the milliseconds left
// before it expires, given the SQL parameters holding the expiry (seconds)
// and self's id.
func othersLeftSQL(expire, self string) string {
	return `
		SELECT id::text, (extract(epoch FROM heartbeat_at + make_interval(secs => ` + expire + `) - clock_timestamp()) * 1000)::bigint
		FROM cluster_nodes WHERE id::text <> ` + self + `::text`
}

// nodeUpsert runs upsertSQL.
func nodeUpsert(ctx context.Context, q db.DB, n Node) error {
	_, err := q.Exec(ctx, upsertSQL, n.ID, n.Name, n.Addr, n.Roles, n.Version, n.StartedAt, n.Draining)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

// nodeLeft is another node as a heartbeat saw it: how long until it
// expires (negative: expired that long ago).
type nodeLeft struct {
	id   string
	left time.Duration
}

// nodeBeat is nodeUpsert and the other nodes' time left before they
// expire, in one statement: a heartbeat is one round trip, and what it
// reads answers both the rescue of expired nodes and DeadNodes. The other
// nodes are read from the statement's snapshot, before this beat, so this
// node itself is left out (its own beat is in the same statement).
func nodeBeat(ctx context.Context, q db.DB, n Node, expire time.Duration) ([]nodeLeft, error) {
	rows, err := q.Query(ctx, `WITH beat AS (`+upsertSQL+`)`+othersLeftSQL("$8", "$1"),
		n.ID, n.Name, n.Addr, n.Roles, n.Version, n.StartedAt, n.Draining, expire.Seconds())
	return collectNodesLeft(rows, err, "register node")
}

// nodesLeft is every node but self with its time left (nodeBeat's read,
// alone).
func nodesLeft(ctx context.Context, q db.DB, self string, expire time.Duration) ([]nodeLeft, error) {
	rows, err := q.Query(ctx, othersLeftSQL("$1", "$2"), expire.Seconds(), self)
	return collectNodesLeft(rows, err, "list dead nodes")
}

// collectNodesLeft reads the rows of othersLeftSQL; what names the
// statement in errors.
func collectNodesLeft(rows pgx.Rows, err error, what string) ([]nodeLeft, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	others, err := pgx.CollectRows(rows, scanNodeLeft)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return others, nil
}

// scanNodeLeft reads a row of (id, milliseconds left).
func scanNodeLeft(row pgx.CollectableRow) (nodeLeft, error) {
	var o nodeLeft
	var ms int64
	err := row.Scan(&o.id, &ms)
	o.left = time.Duration(ms) * time.Millisecond
	return o, err
}

func nodeDelete(ctx context.Context, q db.DB, id string) error {
	if _, err := q.Exec(ctx, `DELETE FROM cluster_nodes WHERE id = $1`, id); err != nil {
		return fmt.Errorf("deregister: %w", err)
	}
	return nil
}

func nodeSetDraining(ctx context.Context, q db.DB, id string) error {
	if _, err := q.Exec(ctx, `UPDATE cluster_nodes SET draining = true WHERE id = $1`, id); err != nil {
		return fmt.Errorf("record draining: %w", err)
	}
	return nil
}

const nodeColumns = `id::text, name, addr, roles, version, started_at,
	(extract(epoch FROM clock_timestamp() - heartbeat_at) * 1000)::bigint, draining`

func scanNode(row pgx.Row) (Node, error) {
	var n Node
	var ageMS int64
	err := row.Scan(&n.ID, &n.Name, &n.Addr, &n.Roles, &n.Version, &n.StartedAt, &ageMS, &n.Draining)
	n.HeartbeatAge = time.Duration(max(ageMS, 0)) * time.Millisecond
	return n, err
}

// nodeList returns every registered node, live or not yet reaped, oldest first.
func nodeList(ctx context.Context, q db.DB) ([]Node, error) {
	rows, err := q.Query(ctx, `SELECT `+nodeColumns+` FROM cluster_nodes ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) { return scanNode(r) })
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return nodes, nil
}

func nodeByID(ctx context.Context, q db.DB, id string) (Node, error) {
	n, err := scanNode(q.QueryRow(ctx, `SELECT `+nodeColumns+` FROM cluster_nodes WHERE id::text = $1`, id))
	if err != nil {
		return n, fmt.Errorf("read node %s: %w", id, db.Translate(err))
	}
	return n, nil
}

// nodesExpired lists the nodes silent for longer than expire.
func nodesExpired(ctx context.Context, q db.DB, expire time.Duration) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id::text FROM cluster_nodes WHERE heartbeat_at < clock_timestamp() - make_interval(secs => $1)`, expire.Seconds())
	if err != nil {
		return nil, fmt.Errorf("list dead nodes: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list dead nodes: %w", err)
	}
	return ids, nil
}

// nodesReap deletes nodes silent for longer than silentFor.
func nodesReap(ctx context.Context, q db.DB, silentFor time.Duration) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM cluster_nodes WHERE heartbeat_at < clock_timestamp() - make_interval(secs => $1)`, silentFor.Seconds())
	if err != nil {
		return 0, fmt.Errorf("reap dead nodes: %w", err)
	}
	return tag.RowsAffected(), nil
}
