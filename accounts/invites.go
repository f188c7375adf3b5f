package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Invites bring an address into a project with a role: a single-use token
// (InvitePrefix and 32 random bytes, only its SHA-256 stored) valid
// InviteTTL, accepted by a signed-in account whose normalised address is
// the invited one, or redeemed by a registration on a server whose
// registration is invite (Invites implements InviteRedeemer).

// InvitePrefix starts every invite token.
const InvitePrefix = "sbi_"

// InviteTTL is how long an invite can be accepted.
const InviteTTL = 7 * 24 * time.Hour

// MaxPendingInvites bounds a project's pending invites.
const MaxPendingInvites = 100

// Errors of invites.
var (
	ErrInviteNotFound        = fmt.Errorf("%w: this invite is unknown, used, revoked or expired", db.ErrNotFound)
	ErrAlreadyMember         = fmt.Errorf("%w: an account with this address is a member of the project already", db.ErrConflict)
	ErrInvitePending         = fmt.Errorf("%w: this address has a pending invite to the project; revoke it first", db.ErrConflict)
	ErrTooManyInvites        = fmt.Errorf("%w: a project has at most %d pending invites", db.ErrConflict, MaxPendingInvites)
	ErrInviteOtherMail error = &ForbiddenError{"this invite was sent to another address: sign in with the invited account"}
)

// Invite is a pending (or just made) invite.
type Invite struct {
	ID        string
	ProjectID string
	Email     string
	Role      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// NewInvite is an invite CreateInvite stores.
type NewInvite struct {
	ProjectID, InvitedBy string
	// Email is normalised by CreateInvite.
	Email string
	// Role is viewer, developer or admin; owner only when ActorRole is.
	Role, ActorRole string
}

const inviteColumns = "id::text, project_id::text, email, role, created_at, expires_at"

func scanInvite(row pgx.Row, i *Invite) error {
	return row.Scan(&i.ID, &i.ProjectID, &i.Email, &i.Role, &i.CreatedAt, &i.ExpiresAt)
}

// CreateInvite stores an invite and returns it with its token, shown only
// here. An address that is a member already is ErrAlreadyMember, one with
// a pending invite ErrInvitePending; the project's row is locked, so two
// invites of one address cannot both be made.
func CreateInvite(ctx context.Context, q db.DB, n NewInvite) (Invite, string, error) {
	if !ValidProjectRole(n.Role) {
		return Invite{}, "", ErrInvalidProjectRole
	}
	if n.Role == ProjectOwner && n.ActorRole != ProjectOwner {
		return Invite{}, "", ErrOwnerOnly
	}
	token := secretKind(InvitePrefix).newSecret()
	var inv Invite
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		if err := checkInvitable(ctx, tx, n.ProjectID, n.Email); err != nil {
			return err
		}
		return scanInvite(tx.QueryRow(ctx, `
			INSERT INTO project_invites (project_id, email, role, token_hash, invited_by, expires_at)
			VALUES ($1, $2, $3, $4, $5, now() + $6::interval) RETURNING `+inviteColumns,
			n.ProjectID, n.Email, n.Role, hashSecret(token), n.InvitedBy, InviteTTL.String()), &inv)
	})
	if err != nil {
		return Invite{}, "", translate(err, ErrProjectNotFound)
	}
	return inv, token, nil
}

// checkInvitable locks the project and refuses an address that is a
// member or has a pending invite, and a project at MaxPendingInvites.
func checkInvitable(ctx context.Context, tx pgx.Tx, projectID, email string) error {
	var member, pending bool
	var n int
	err := tx.QueryRow(ctx, `
		WITH p AS (SELECT id FROM projects WHERE id = $1 FOR UPDATE)
		SELECT EXISTS (SELECT FROM project_members m JOIN users u ON u.id = m.user_id WHERE m.project_id = p.id AND u.email = $2),
		       EXISTS (SELECT FROM project_invites i WHERE i.project_id = p.id AND i.email = $2 `+pendingInvite+`),
		       (SELECT count(*) FROM project_invites i WHERE i.project_id = p.id `+pendingInvite+`)
		FROM p`, projectID, email).Scan(&member, &pending, &n)
	switch {
	case err != nil:
		return err
	case member:
		return ErrAlreadyMember
	case pending:
		return ErrInvitePending
	case n >= MaxPendingInvites:
		return ErrTooManyInvites
	}
	return nil
}

const pendingInvite = "AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > now()"

// ListInvites returns the project's pending invites, newest first.
func ListInvites(ctx context.Context, q db.DB, projectID string) ([]Invite, error) {
	rows, err := q.Query(ctx, `SELECT `+inviteColumns+` FROM project_invites i
		WHERE project_id = $1 `+pendingInvite+` ORDER BY created_at DESC, id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Invite, error) {
		var i Invite
		err := scanInvite(row, &i)
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	return out, nil
}

// RevokeInvite revokes a pending invite of the project: ErrInviteNotFound
// when it has none with that id.
func RevokeInvite(ctx context.Context, q db.DB, projectID, id string) error {
	if _, err := projectParam(id); err != nil {
		return ErrInviteNotFound
	}
	tag, err := q.Exec(ctx, `UPDATE project_invites i SET revoked_at = now()
		WHERE id = $1 AND project_id = $2 `+pendingInvite, id, projectID)
	if err != nil {
		return fmt.Errorf("revoke invite: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrInviteNotFound
	}
	return nil
}

// AcceptInvite uses the invite for the account: it becomes a member with
// the invite's role (keeping its role if it is a member already). An
// unknown, used, revoked or expired token is ErrInviteNotFound; one sent
// to another address ErrInviteOtherMail, and stays unused.
func AcceptInvite(ctx context.Context, q db.DB, token, userID, email string) (Project, error) {
	var p Project
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		projectID, err := acceptInvite(ctx, tx, token, userID, email)
		if err != nil {
			return err
		}
		err = scanProject(tx.QueryRow(ctx, `SELECT `+projectColumns+`, m.role FROM projects p
			JOIN project_members m ON m.project_id = p.id AND m.user_id = $1 WHERE p.id = $2`, userID, projectID), &p, &p.Role)
		return err
	})
	if err != nil {
		return Project{}, translate(err, ErrInviteNotFound)
	}
	return p, nil
}

// acceptInvite marks the invite used (one UPDATE: single use under any
// concurrency) and adds the membership; it returns the project's id.
func acceptInvite(ctx context.Context, tx pgx.Tx, token, userID, email string) (string, error) {
	var projectID, invited, role string
	err := tx.QueryRow(ctx, `
		UPDATE project_invites i SET accepted_at = now(), accepted_by = $2
		WHERE token_hash = $1 `+pendingInvite+`
		RETURNING project_id::text, email, role`, hashSecret(token), userID).Scan(&projectID, &invited, &role)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", ErrInviteNotFound
	case err != nil:
		return "", err
	case invited != email:
		return "", ErrInviteOtherMail // the transaction rolls back: unused
	}
	_, err = tx.Exec(ctx, `INSERT INTO project_members (project_id, user_id, role) VALUES ($1, $2, $3)
		ON CONFLICT (project_id, user_id) DO NOTHING`, projectID, userID, role)
	return projectID, err
}

// Invites redeems invite tokens at registration (SWITCHBOARD_REGISTRATION
// invite): the new account joins the project it was invited to.
type Invites struct{}

// RedeemInvite implements InviteRedeemer.
func (Invites) RedeemInvite(ctx context.Context, tx pgx.Tx, token, email, userID string) error {
	_, err := acceptInvite(ctx, tx, token, userID, email)
	if errors.Is(err, ErrInviteNotFound) || errors.Is(err, ErrInviteOtherMail) {
		return ErrInviteInvalid
	}
	return err
}
