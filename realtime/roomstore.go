package realtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/realtime/stream"
)

// Room visibilities.
const (
	VisibilityOpen    = "open"
	VisibilityMembers = "members"
)

// Room is a created room. A room name without one is an open ad-hoc room.
type Room struct {
	Name       string
	OwnerID    string
	ProjectID  string // the project the room belongs to
	Visibility string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// RoomMember is one member of a room (the owner is one).
type RoomMember struct {
	UserID  string
	AddedAt time.Time
}

// Errors of the room store.
var (
	ErrRoomExists = errors.New("a room with this name exists")
	// ErrRoomInUse: the name is an ad-hoc room people use (events retained
	// in its stream, or others present in it); it cannot be created over
	// them.
	ErrRoomInUse   = errors.New("the name is an ad-hoc room in use")
	ErrNoRoom      = errors.New("no room has this name")
	ErrNoUser      = errors.New("no account has this id")
	ErrOwnerMember = errors.New("the owner is always a member of the room")
)

// Rooms is the room store (migrations/00010_rooms.sql). Every change that
// takes access away — a member removed, the room deleted, an open room made
// members-only — notifies every replica in its own transaction (evictNotice),
// so that each replica evicts the affected sockets before it handles the
// doorbell of anything committed after the change.
type Rooms struct {
	DB db.DB
	// Quotas bound what Create makes: at most Quotas.Rooms rooms per
	// project (zero: the default).
	Quotas quota.Limits
}

const roomColumns = "name, owner_id::text, project_id::text, visibility, created_at, updated_at"

func scanRoom(row pgx.Row) (Room, error) {
	var r Room
	err := row.Scan(&r.Name, &r.OwnerID, &r.ProjectID, &r.Visibility, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Room{}, ErrNoRoom
	}
	return r, db.Translate(err)
}

// adHocInUseSQL tells whether an ad-hoc room is in use: its stream
// retains an event (anyone's, any age within retention), or someone other
// than $2 is present in it.
const adHocInUseSQL = `
SELECT EXISTS (SELECT 1 FROM stream_heads h WHERE h.stream = $3 AND h.oldest_offset <= h.last_offset)
    OR EXISTS (SELECT 1 FROM presence p WHERE p.room = $1 AND p.user_id <> $2::uuid)`

// Create makes room name owned by owner (its first member) in project
// ("": the owner's personal project). It is refused with ErrRoomInUse
// over an ad-hoc room in use (adHocInUseSQL), so a created room never
// takes over others' history or presence, and its deletion erases only
// what was written after it existed. A members-only room made over an
// unused name evicts any socket still in it. A project has at most
// Quotas.Rooms rooms (a quota.ExceededError), counted under the project's
// rooms lock, so concurrent creates on any replicas cannot pass it
// together.
func (s Rooms) Create(ctx context.Context, name, owner, visibility, project string) (Room, error) {
	var r Room
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.takeRoom(ctx, tx, owner, project); err != nil {
			return err
		}
		var inUse bool
		if err := tx.QueryRow(ctx, adHocInUseSQL, name, owner, stream.RoomStream(name)).Scan(&inUse); err != nil {
			return err
		}
		var err error
		r, err = scanRoom(tx.QueryRow(ctx, `
			INSERT INTO rooms (name, owner_id, visibility, project_id) VALUES ($1, $2, $3, nullif($4, '')::uuid)
			ON CONFLICT (name) DO NOTHING
			RETURNING `+roomColumns, name, owner, visibility, project))
		if errors.Is(err, ErrNoRoom) {
			return ErrRoomExists
		}
		if err != nil {
			return err
		}
		if inUse {
			return ErrRoomInUse // rolled back
		}
		if _, err := tx.Exec(ctx, `INSERT INTO room_members (room, user_id) VALUES ($1, $2)`, name, owner); err != nil {
			return err
		}
		if visibility == VisibilityMembers {
			return notifyEvict(ctx, tx, evictNotice{Room: name, Reason: reasonRecheck})
		}
		return nil
	})
	return r, wrapRoom("create room", err)
}

// takeRoom takes the rooms lock of the project ("": the owner's personal
// project) and refuses one more room over its quota.
func (s Rooms) takeRoom(ctx context.Context, tx pgx.Tx, owner, project string) error {
	if project == "" {
		err := tx.QueryRow(ctx, `SELECT id::text FROM projects WHERE personal_of = $1`, owner).Scan(&project)
		if err != nil {
			return fmt.Errorf("personal project: %w", err)
		}
	}
	return quota.Take(ctx, tx, quota.Rooms, s.Quotas.OrDefaults().Rooms, project,
		`SELECT count(*) FROM rooms WHERE project_id = $1`, 1)
}

// Get reads a room.
func (s Rooms) Get(ctx context.Context, name string) (Room, error) {
	r, err := scanRoom(s.DB.QueryRow(ctx, `SELECT `+roomColumns+` FROM rooms WHERE name = $1`, name))
	return r, wrapRoom("read room", err)
}

// SetVisibility changes a room's visibility; an unchanged one is not
// written. Open to members evicts the non-members' sockets.
func (s Rooms) SetVisibility(ctx context.Context, name, visibility string) (Room, error) {
	var r Room
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = scanRoom(tx.QueryRow(ctx, `
			UPDATE rooms SET visibility = $2, updated_at = now()
			WHERE name = $1 AND visibility <> $2
			RETURNING `+roomColumns, name, visibility))
		if errors.Is(err, ErrNoRoom) { // unchanged, or no such room
			r, err = scanRoom(tx.QueryRow(ctx, `SELECT `+roomColumns+` FROM rooms WHERE name = $1`, name))
			return err
		}
		if err == nil && visibility == VisibilityMembers {
			err = notifyEvict(ctx, tx, evictNotice{Room: name, Reason: reasonRecheck})
		}
		return err
	})
	return r, wrapRoom("change room", err)
}

// Delete removes a room, its members and its stream's history (the name is
// an empty ad-hoc room afterwards), and evicts every socket in it.
func (s Rooms) Delete(ctx context.Context, name string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM rooms WHERE name = $1`, name)
		switch {
		case err != nil:
			return err
		case tag.RowsAffected() == 0:
			return ErrNoRoom
		}
		if err := stream.Reset(ctx, tx, stream.RoomStream(name)); err != nil {
			return err
		}
		return notifyEvict(ctx, tx, evictNotice{Room: name, Reason: ReasonDeleted})
	})
	return wrapRoom("delete room", err)
}

// AddMember makes user a member of room (already one: unchanged).
func (s Rooms) AddMember(ctx context.Context, room, user string) (RoomMember, error) {
	var m RoomMember
	err := s.DB.QueryRow(ctx, `
		WITH added AS (
			INSERT INTO room_members (room, user_id) SELECT name, $2 FROM rooms WHERE name = $1
			ON CONFLICT (room, user_id) DO NOTHING
			RETURNING user_id::text, added_at
		)
		SELECT * FROM added
		UNION ALL
		SELECT user_id::text, added_at FROM room_members WHERE room = $1 AND user_id = $2`, room, user).Scan(&m.UserID, &m.AddedAt)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23503": // foreign_key_violation: the user
		err = ErrNoUser
	case errors.Is(err, pgx.ErrNoRows):
		err = ErrNoRoom
	}
	return m, wrapRoom("add room member", err)
}

// RemoveMember ends user's membership of room and evicts their sockets
// from it on every replica. Not a member: nothing changes.
func (s Rooms) RemoveMember(ctx context.Context, room, user string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var owner string
		if err := tx.QueryRow(ctx, `SELECT owner_id::text FROM rooms WHERE name = $1 FOR SHARE`, room).Scan(&owner); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNoRoom
			}
			return err
		}
		if owner == user {
			return ErrOwnerMember
		}
		tag, err := tx.Exec(ctx, `DELETE FROM room_members WHERE room = $1 AND user_id = $2`, room, user)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return notifyEvict(ctx, tx, evictNotice{Room: room, User: user, Reason: ReasonRemoved})
	})
	return wrapRoom("remove room member", err)
}

// Members is a page of room's members in (added_at, user_id) order after
// the given position, at most limit+1 of them (one more than a page: only
// then is there a next page). ErrNoRoom for an unknown room.
func (s Rooms) Members(ctx context.Context, room string, after time.Time, afterID string, limit int) ([]RoomMember, error) {
	rows, err := s.DB.Query(ctx, `
		SELECT m.user_id::text, m.added_at FROM rooms r
		LEFT JOIN LATERAL (
			SELECT user_id, added_at FROM room_members
			WHERE room = r.name AND (added_at, user_id) > ($2, $3::uuid)
			ORDER BY added_at, user_id LIMIT $4
		) m ON true
		WHERE r.name = $1`, room, after, afterID, limit+1)
	if err != nil {
		return nil, wrapRoom("list room members", err)
	}
	defer rows.Close()
	out, found := []RoomMember{}, false
	for rows.Next() {
		var id *string
		var at *time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, wrapRoom("list room members", err)
		}
		found = true
		if id != nil {
			out = append(out, RoomMember{UserID: *id, AddedAt: *at})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrapRoom("list room members", err)
	}
	if !found {
		return nil, ErrNoRoom
	}
	return out, nil
}

// CanUseRoom reports whether user may join, post to and read room: an
// ad-hoc or open room, or a members-only room user is a member of.
func (s Rooms) CanUseRoom(ctx context.Context, room, user string) (bool, error) {
	var ok bool
	err := s.DB.QueryRow(ctx, `
		SELECT NOT EXISTS (
			SELECT FROM rooms r WHERE r.name = $1 AND r.visibility = 'members'
			  AND NOT EXISTS (SELECT FROM room_members m WHERE m.room = r.name AND m.user_id::text = $2))`,
		room, user).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check room access: %w", err)
	}
	return ok, nil
}

// Denied returns, of the users asked about per room, those who may not use
// it now, in one query.
func (s Rooms) Denied(ctx context.Context, ask map[string][]string) (map[string][]string, error) {
	var rooms, users []string
	for room, us := range ask {
		for _, u := range us {
			rooms, users = append(rooms, room), append(users, u)
		}
	}
	if len(rooms) == 0 {
		return nil, nil
	}
	rows, err := s.DB.Query(ctx, `
		SELECT a.room, a.user_id FROM unnest($1::text[], $2::text[]) AS a (room, user_id)
		JOIN rooms r ON r.name = a.room AND r.visibility = 'members'
		WHERE NOT EXISTS (SELECT FROM room_members m WHERE m.room = a.room AND m.user_id::text = a.user_id)`, rooms, users)
	if err != nil {
		return nil, fmt.Errorf("check room access: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var room, user string
		if err := rows.Scan(&room, &user); err != nil {
			return nil, fmt.Errorf("check room access: %w", err)
		}
		out[room] = append(out[room], user)
	}
	return out, rows.Err()
}

func (s Rooms) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// wrapRoom keeps the store's errors recognisable and says what failed
// otherwise.
func wrapRoom(action string, err error) error {
	switch {
	case err == nil, errors.Is(err, ErrRoomExists), errors.Is(err, ErrRoomInUse), errors.Is(err, ErrNoRoom), errors.Is(err, ErrNoUser), errors.Is(err, ErrOwnerMember):
		return err
	}
	return fmt.Errorf("%s: %w", action, db.Translate(err))
}
