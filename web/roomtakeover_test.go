package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/realtime/stream"
)

// POST /v1/rooms over an ad-hoc room people use is refused (409): with
// events retained in its stream, or with others present in it. A name
// with neither can be claimed; so every event a created room's DELETE
// erases was written after the room existed.
func TestCreatingARoomOverAUsedAdHocRoomIsRefused(t *testing.T) {
	t.Parallel()
	b := setupRooms(t)
	squatter, _ := b.register(t, "squatter@example.com")
	_, victim := b.register(t, "victim@example.com")
	ctx, pool := context.Background(), b.server.opts.Pool

	busy := "busy-" + uuid.NewString()
	if _, err := stream.Append(ctx, pool, []stream.Event{{Stream: stream.RoomStream(busy), Event: "room.message", Payload: []byte(`"hi"`)}}); err != nil {
		t.Fatal(err)
	}
	crowded := "crowded-" + uuid.NewString()
	if _, err := pool.Exec(ctx, `INSERT INTO presence (room, user_id, node_id, connections) VALUES ($1, $2, $3, 1)`, crowded, victim, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{busy, crowded} {
		res := b.do(t, http.MethodPost, "/v1/rooms", map[string]string{"name": name, "visibility": "members"}, squatter)
		requireProblem(t, res, http.StatusConflict)
		if d, _ := res.body["detail"].(string); !strings.Contains(d, "in use") {
			t.Errorf("%s: %s", name, res.raw)
		}
	}
	if h, err := stream.Read(ctx, pool, stream.RoomStream(busy), 0, stream.Limit{}); err != nil || len(h.Events) != 1 {
		t.Fatalf("the ad-hoc room's history: %d events, %v", len(h.Events), err)
	}
	fresh := "fresh-" + uuid.NewString()
	if res := b.do(t, http.MethodPost, "/v1/rooms", map[string]string{"name": fresh, "visibility": "members"}, squatter); res.status != http.StatusCreated {
		t.Fatalf("an unused name: %d %s", res.status, res.raw)
	}
}
