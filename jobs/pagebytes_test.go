package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/infra/quota"
)

// A page of runs stops at PageBytes (and one run over it): big inputs make
// pages of fewer items, and next_cursor goes on from the last one kept.
func TestListPagesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	task := b.task(t, func(t *Task) { t.Schedule, t.Overlap = nil, OverlapAllow })
	payload := json.RawMessage(`"` + strings.Repeat("x", 60<<10) + `"`)
	const n = 40 // 2.4 MB of inputs
	var want []string
	for range n {
		res, err := Trigger(ctx, b.pool, b.river, quota.Limits{}, TriggerRequest{ProjectID: b.project, TaskID: task.ID, Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{res.Run.ID}, want...)
	}
	var got []string
	page := Page{Limit: MaxLimit}
	for pages := 1; ; pages++ {
		items, next, err := ListRuns(ctx, b.pool, b.project, task.ID, page)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, r := range items {
			got, size = append(got, r.ID), size+len(r.Payload)
		}
		if size > PageBytes+len(payload) {
			t.Fatalf("page %d: %d runs, %d bytes of inputs; the budget is %d", pages, len(items), size, PageBytes)
		}
		if next == "" {
			if pages < 2 {
				t.Fatalf("%d runs of %d bytes in one page", n, len(payload))
			}
			break
		}
		page.Cursor = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("runs newest first, each once:\n got %v\nwant %v", got, want)
	}
}
