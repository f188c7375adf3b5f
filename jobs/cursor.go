package jobs

import (
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Page asks for one page of a newest-first listing.
type Page struct {
	Limit  int    // 1..MaxLimit; 0 means DefaultLimit
	Cursor string // next_cursor of the previous page; "" for the first
}

// Page sizes.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// ErrBadCursor is a cursor this service did not hand out.
var ErrBadCursor = errors.New("cursor is invalid: pass next_cursor from the previous page unchanged")

// cursor is the position after the last item of a page: (created_at, id)
// of that item, in the order the listing uses.
type cursor struct {
	createdAt time.Time
	id        string
}

func (p Page) limit() int {
	if p.Limit <= 0 {
		return DefaultLimit
	}
	return min(p.Limit, MaxLimit)
}

// decode returns the position to continue from; the zero cursor for the
// first page, with a far-future time so every row is "before" it.
func (p Page) decode() (cursor, error) {
	if p.Cursor == "" {
		return cursor{createdAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), id: "ffffffff-ffff-ffff-ffff-ffffffffffff"}, nil
	}
	t, id, err := DecodeCursor(p.Cursor)
	if err != nil {
		return cursor{}, err
	}
	return cursor{createdAt: t, id: id}, nil
}

// DecodeCursor reads a cursor EncodeCursor made: the (created_at, id) of
// the last item of a page. Anything else is ErrBadCursor.
func DecodeCursor(s string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, "", ErrBadCursor
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return time.Time{}, "", ErrBadCursor
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || uuid.Validate(id) != nil {
		return time.Time{}, "", ErrBadCursor
	}
	return t, id, nil
}

// EncodeCursor is the opaque next_cursor of a page whose last item is
// (createdAt, id): listings continue from the position, not from a row
// that may have been deleted since.
func EncodeCursor(createdAt time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(createdAt.UTC().Format(time.RFC3339Nano) + "|" + id))
}

// PageBytes bounds a page of a listing in bytes as well as in items: rows
// are taken while the page's columns (as the database sent them) hold
// less, so a page is at most PageBytes plus one row, and next_cursor goes
// on after the last row taken.
const PageBytes = 1 << 20

// collectPage reads rows until the page holds p.limit() items or
// PageBytes, and one row more: if it came, there is a next page, which
// starts after the last item kept. Rows past it are never scanned: closing
// them discards what the database still sends.
func collectPage[T any](p Page, rows pgx.Rows, scan func(pgx.CollectableRow) (T, error), key func(T) (time.Time, string)) ([]T, string, error) {
	defer rows.Close()
	var items []T
	size := 0
	for rows.Next() {
		if len(items) == p.limit() || (len(items) > 0 && size >= PageBytes) {
			rows.Close()
			return items, EncodeCursor(key(items[len(items)-1])), rows.Err()
		}
		for _, v := range rows.RawValues() {
			size += len(v)
		}
		item, err := scan(rows)
		if err != nil {
			return nil, "", err
		}
		items = append(items, item)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	return nonNil(items), "", nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
