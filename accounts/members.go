package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Member is an account's membership of a project.
type Member struct {
	UserID  string
	Email   string
	Role    string
	AddedAt time.Time
}

// ListMembers returns at most limit members of the project after the
// position (AddedAt and ID of the last one seen), in the order they were
// added, and whether more follow.
func ListMembers(ctx context.Context, q db.DB, projectID string, after Position, limit int) ([]Member, bool, error) {
	if after.ID == "" {
		after.ID = "00000000-0000-0000-0000-000000000000"
	}
	rows, err := q.Query(ctx, `
		SELECT m.user_id::text, u.email, m.role, m.added_at
		FROM project_members m JOIN users u ON u.id = m.user_id
		WHERE m.project_id = $1 AND (m.added_at, m.user_id) > ($2, $3::uuid)
		ORDER BY m.added_at, m.user_id LIMIT $4`, projectID, after.CreatedAt, after.ID, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list members: %w", err)
	}
	members, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Member, error) {
		var m Member
		err := row.Scan(&m.UserID, &m.Email, &m.Role, &m.AddedAt)
		return m, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list members: %w", err)
	}
	if len(members) <= limit {
		return members, false, nil
	}
	return members[:limit], true, nil
}

// MemberChange is a change to a membership asked by an actor with a role
// in the project.
type MemberChange struct {
	ProjectID, UserID string
	// ActorRole is the role of who asks; only an owner grants, changes or
	// takes the owner role.
	ActorRole string
	// Role is the new role; "" removes the member.
	Role string
}

// ChangeMember applies a change of role, or a removal, and returns the
// membership as it is after (the zero Member after a removal). The
// project's row is locked, so two changes that would each leave one owner
// cannot both pass: the last owner is ErrLastOwner. A removal notifies
// every replica in the same transaction (the sockets of the member leave
// the project's stream).
func ChangeMember(ctx context.Context, q db.DB, c MemberChange) (Member, error) {
	if c.Role != "" && !ValidProjectRole(c.Role) {
		return Member{}, ErrInvalidProjectRole
	}
	var out Member
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		current, owners, err := lockMember(ctx, tx, c.ProjectID, c.UserID)
		if err != nil {
			return err
		}
		if (current == ProjectOwner || c.Role == ProjectOwner) && c.ActorRole != ProjectOwner && current != c.Role {
			return ErrOwnerOnly
		}
		if current == ProjectOwner && c.Role != ProjectOwner && owners == 1 {
			return ErrLastOwner
		}
		if c.Role == "" {
			_, err := tx.Exec(ctx, `DELETE FROM project_members WHERE project_id = $1 AND user_id = $2`, c.ProjectID, c.UserID)
			return err
		}
		return tx.QueryRow(ctx, `
			WITH m AS (UPDATE project_members SET role = $3 WHERE project_id = $1 AND user_id = $2 RETURNING user_id, role, added_at)
			SELECT m.user_id::text, u.email, m.role, m.added_at FROM m JOIN users u ON u.id = m.user_id`,
			c.ProjectID, c.UserID, c.Role).Scan(&out.UserID, &out.Email, &out.Role, &out.AddedAt)
	})
	if err != nil {
		return Member{}, translate(err, ErrMemberNotFound)
	}
	return out, nil
}

// ErrInvalidProjectRole is a role that is not a project role.
var ErrInvalidProjectRole = errors.New("role must be viewer, developer, admin or owner")

// lockMember locks the project's row and returns the member's role and
// the project's number of owners.
func lockMember(ctx context.Context, tx pgx.Tx, projectID, userID string) (string, int, error) {
	tag, err := tx.Exec(ctx, `SELECT FROM projects WHERE id = $1 FOR UPDATE`, projectID)
	if err != nil {
		return "", 0, err
	}
	if tag.RowsAffected() == 0 {
		return "", 0, ErrProjectNotFound
	}
	var role string
	var owners int
	err = tx.QueryRow(ctx, `
		SELECT m.role, (SELECT count(*) FROM project_members WHERE project_id = $1 AND role = 'owner')
		FROM project_members m WHERE m.project_id = $1 AND m.user_id = $2`, projectID, userID).Scan(&role, &owners)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, ErrMemberNotFound
	}
	return role, owners, err
}

// IsMember reports whether the account is a member of the project.
func IsMember(ctx context.Context, q db.DB, projectID, userID string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM project_members WHERE project_id = $1 AND user_id = $2)`, projectID, userID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read membership: %w", err)
	}
	return ok, nil
}
