package realtime

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard/switchboard/infra/db"
)

// PresenceUser is one user in a room, over every node.
type PresenceUser struct {
	UserID      string `json:"user_id"`
	Connections int    `json:"connections" doc:"the user's sockets in the room, over every node"`
}

// Presence is who is in a room, as GET /v1/presence answers: the same rows
// presence.join and presence.leave announce the changes of.
type Presence struct {
	Room     string         `json:"room"`
	Users    []PresenceUser `json:"users"`
	Degraded bool           `json:"degraded" doc:"true when some members are held by nodes that stopped heartbeating: they may be gone, and their presence.leave follows once the node is judged dead"`
	// UnavailableNodes are those nodes.
	UnavailableNodes []string `json:"unavailable_nodes" doc:"ids of the nodes that stopped heartbeating while holding members of the room"`
}

// PresenceReader reads the presence table (GET /v1/presence).
type PresenceReader struct {
	DB db.DB
	// SuspectAfter: a node silent this long makes the answer degraded;
	// default 5 s.
	SuspectAfter time.Duration
}

// RoomPresence is who is in room over every node, in one query.
func (r PresenceReader) RoomPresence(ctx context.Context, room string) (Presence, error) {
	// Why cluster_nodes: a node that stopped heartbeating still holds its
	// rows until it is judged dead; the answer says so.
	rows, err := r.DB.Query(ctx, `
		SELECT p.user_id::text, p.node_id::text, p.connections,
			n.id IS NULL OR n.heartbeat_at < clock_timestamp() - make_interval(secs => $2)
		FROM presence p LEFT JOIN cluster_nodes n ON n.id = p.node_id
		WHERE p.room = $1`, room, cmp.Or(r.SuspectAfter, 5*time.Second).Seconds())
	if err != nil {
		return Presence{}, fmt.Errorf("read presence: %w", err)
	}
	defer rows.Close()
	out := Presence{Room: room, Users: []PresenceUser{}, UnavailableNodes: []string{}}
	users := map[string]int{}
	for rows.Next() {
		var user, node string
		var n int
		var suspect bool
		if err := rows.Scan(&user, &node, &n, &suspect); err != nil {
			return Presence{}, fmt.Errorf("read presence: %w", err)
		}
		users[user] += n
		if suspect && !slices.Contains(out.UnavailableNodes, node) {
			out.UnavailableNodes = append(out.UnavailableNodes, node)
		}
	}
	if err := rows.Err(); err != nil {
		return Presence{}, fmt.Errorf("read presence: %w", err)
	}
	for user, n := range users {
		out.Users = append(out.Users, PresenceUser{UserID: user, Connections: n})
	}
	slices.SortFunc(out.Users, func(a, b PresenceUser) int { return cmp.Compare(a.UserID, b.UserID) })
	slices.Sort(out.UnavailableNodes)
	out.Degraded = len(out.UnavailableNodes) > 0
	return out, nil
}
