package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/realtime/stream"
)

// fillStream appends n events of about size bytes each to name.
func fillStream(t *testing.T, b *testBundle, name string, n, size int) {
	t.Helper()
	payload := []byte(`"` + strings.Repeat("x", size) + `"`)
	for range n {
		if _, err := stream.Append(context.Background(), b.server.opts.Pool, []stream.Event{{Stream: name, Event: "big", Payload: payload}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHistoryPagesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	b := setupRooms(t)
	tok, _ := b.register(t, "pages@example.com")
	room := "big-" + uuid.NewString()
	const events, size = 40, 60 << 10 // 2.4 MB stored
	fillStream(t, b, stream.RoomStream(room), events, size)

	since, pages := int64(0), 0
	for {
		res := b.do(t, http.MethodGet, "/v1/history?limit=1000&stream=room:"+room+"&since="+jsonInt(since), nil, tok)
		if res.status != http.StatusOK {
			t.Fatalf("page after %d: %d %s", since, res.status, res.raw)
		}
		if len(res.raw) > readBudget+size+1024 {
			t.Fatalf("a page of %d bytes; the budget is %d (one event over it at most)", len(res.raw), readBudget)
		}
		var page struct {
			Events []struct {
				Offset int64 `json:"offset"`
			} `json:"events"`
			Next int64 `json:"next_offset"`
			More bool  `json:"more"`
		}
		if err := json.Unmarshal(res.raw, &page); err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			if e.Offset != since+1 {
				t.Fatalf("offset %d after %d", e.Offset, since)
			}
			since = e.Offset
		}
		if pages++; page.Next != since || !page.More {
			if page.More || since != events {
				t.Fatalf("page %d: next %d more %v after offset %d of %d", pages, page.Next, page.More, since, events)
			}
			break
		}
	}
	if pages < 2 {
		t.Fatalf("%d pages for %d bytes", pages, events*size)
	}
}

// readBudget is the default byte budget of a read (SWITCHBOARD_READ_BYTES).
const readBudget = 1 << 20

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
