package realtime

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/infra/db"
)

// SpillRetention is how long spilled bus messages are kept: readers fetch
// them within milliseconds, so minutes are plenty.
const SpillRetention = 5 * time.Minute

// DeleteSpilled deletes spilled bus messages older than olderThan (a
// maintenance task).
func DeleteSpilled(ctx context.Context, q db.DB, olderThan time.Duration) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM bus_spill WHERE created_at < now() - make_interval(secs => $1)`, olderThan.Seconds())
	if err != nil {
		return 0, fmt.Errorf("delete spilled bus messages: %w", err)
	}
	return tag.RowsAffected(), nil
}
