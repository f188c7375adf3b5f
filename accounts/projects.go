package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// A project owns tasks (and so their runs), created rooms, API keys and
// the stream of its run events, and is shared by members with roles.
// Every account has a personal project, made with it (a trigger of
// migration 00016); a personal project can be renamed and shared, never
// deleted. A project always keeps at least one owner.

// Project roles, from least to most: a member can do what its role and
// every lesser one can.
const (
	// ProjectViewer reads tasks, runs, rooms and history and receives the
	// project's run events.
	ProjectViewer = "viewer"
	// ProjectDeveloper creates, edits, triggers, cancels, retries and
	// backfills; publishes; manages rooms.
	ProjectDeveloper = "developer"
	// ProjectAdmin manages members, invites and API keys.
	ProjectAdmin = "admin"
	// ProjectOwner renames and deletes the project and grants or takes
	// the owner role.
	ProjectOwner = "owner"
)

var projectRanks = map[string]int{ProjectViewer: 1, ProjectDeveloper: 2, ProjectAdmin: 3, ProjectOwner: 4}

// ValidProjectRole reports whether role is a project role.
func ValidProjectRole(role string) bool { return projectRanks[role] > 0 }

// RoleAtLeast reports whether the project role have includes need.
func RoleAtLeast(have, need string) bool {
	return projectRanks[have] > 0 && projectRanks[have] >= projectRanks[need]
}

// LesserRole is the lesser of two project roles.
func LesserRole(a, b string) string {
	if projectRanks[a] <= projectRanks[b] {
		return a
	}
	return b
}

// MaxProjectsPerUser bounds the projects one account creates (and lists).
const MaxProjectsPerUser = 100

// MaxProjectNameLen bounds a project's name, in characters.
const MaxProjectNameLen = 100

// Errors of projects and their members.
var (
	ErrProjectNotFound       = fmt.Errorf("%w: project not found", db.ErrNotFound)
	ErrMemberNotFound        = fmt.Errorf("%w: this account is not a member of the project", db.ErrNotFound)
	ErrPersonalProject       = fmt.Errorf("%w: a personal project cannot be deleted; rename it instead", db.ErrConflict)
	ErrLastOwner             = fmt.Errorf("%w: a project keeps at least one owner: make another member owner first", db.ErrConflict)
	ErrTooManyProjects       = fmt.Errorf("%w: an account creates at most %d projects", db.ErrConflict, MaxProjectsPerUser)
	ErrOwnerOnly       error = &ForbiddenError{"only an owner of the project grants, changes or takes the owner role"}
)

// Project is a project as one member sees it: with that member's role.
type Project struct {
	ID        string
	Name      string
	Personal  bool // the caller's personal project
	Role      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

const projectColumns = "p.id::text, p.name, p.personal_of IS NOT NULL AND p.personal_of = $1::uuid, p.created_at, p.updated_at"

func scanProject(row pgx.Row, p *Project, extra ...any) error {
	return row.Scan(append([]any{&p.ID, &p.Name, &p.Personal, &p.CreatedAt, &p.UpdatedAt}, extra...)...)
}

// CreateProject makes a project owned by the account. An account creates
// at most MaxProjectsPerUser (its row is locked while counting).
func CreateProject(ctx context.Context, q db.DB, userID, name string) (Project, error) {
	var p Project
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT FROM users WHERE id = $1 FOR UPDATE`, userID); err != nil {
			return err
		}
		var n int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM project_members WHERE user_id = $1 AND role = 'owner'`, userID).Scan(&n)
		if err != nil {
			return err
		}
		if n > MaxProjectsPerUser { // the personal project is not counted
			return ErrTooManyProjects
		}
		if err := scanProject(tx.QueryRow(ctx, `
			INSERT INTO projects AS p (name) VALUES ($2) RETURNING `+projectColumns, userID, name), &p); err != nil {
			return err
		}
		p.Role = ProjectOwner
		_, err = tx.Exec(ctx, `INSERT INTO project_members (project_id, user_id, role) VALUES ($1, $2, 'owner')`, p.ID, userID)
		return err
	})
	return p, translate(err, ErrUserNotFound)
}

// ListProjects returns the account's projects with its role in each: its
// personal project first, then oldest first (at most
// MaxProjectsPerUser × 10).
func ListProjects(ctx context.Context, q db.DB, userID string) ([]Project, error) {
	rows, err := q.Query(ctx, `
		SELECT `+projectColumns+`, m.role FROM project_members m JOIN projects p ON p.id = m.project_id
		WHERE m.user_id = $1
		ORDER BY p.personal_of IS NOT DISTINCT FROM $1::uuid DESC, p.created_at, p.id LIMIT $2`, userID, MaxProjectsPerUser*10)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Project, error) {
		var p Project
		err := scanProject(row, &p, &p.Role)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return out, nil
}

// GetProject returns a project as userID sees it, with role (the caller's,
// resolved by ResolveAccess).
func GetProject(ctx context.Context, q db.DB, id, userID, role string) (Project, error) {
	p := Project{Role: role}
	err := scanProject(q.QueryRow(ctx, `SELECT `+projectColumns+` FROM projects p WHERE p.id = $2`, userID, id), &p)
	return p, translate(err, ErrProjectNotFound)
}

// RenameProject renames a project.
func RenameProject(ctx context.Context, q db.DB, id, userID, role, name string) (Project, error) {
	p := Project{Role: role}
	err := scanProject(q.QueryRow(ctx, `
		UPDATE projects p SET name = $3, updated_at = now() WHERE p.id = $2
		RETURNING `+projectColumns, userID, id, name), &p)
	return p, translate(err, ErrProjectNotFound)
}

// DeleteProject deletes a project with its tasks, runs, rooms, keys,
// invites and members (every replica's sockets of its members leave its
// stream), and its stream. A personal project is ErrPersonalProject.
func DeleteProject(ctx context.Context, q db.DB, id string) error {
	return pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		var personal bool
		err := tx.QueryRow(ctx, `SELECT personal_of IS NOT NULL FROM projects WHERE id = $1 FOR UPDATE`, id).Scan(&personal)
		switch {
		case err != nil:
			return translate(err, ErrProjectNotFound)
		case personal:
			return ErrPersonalProject
		}
		if _, err := tx.Exec(ctx, `DELETE FROM projects WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete project: %w", err)
		}
		_, err = tx.Exec(ctx, `
			WITH h AS (DELETE FROM stream_heads WHERE stream = 'project:' || $1::text RETURNING id)
			DELETE FROM stream_events WHERE stream_id IN (SELECT id FROM h)`, id)
		return err
	})
}

// Access is what a request may do: its account's role on the instance,
// and the project it acts in with its role there.
type Access struct {
	Role        string
	ProjectID   string
	ProjectRole string
}

// projectOf resolves the project a request acts in and the account's role
// there from what a statement read: an instance admin acts as owner of any
// project, anyone else must be a member.
func projectOf(a *Access, projectID, memberRole *string) error {
	switch {
	case projectID == nil:
		return ErrProjectNotFound
	case memberRole != nil:
		a.ProjectID, a.ProjectRole = *projectID, *memberRole
	case a.Role == RoleAdmin:
		a.ProjectID, a.ProjectRole = *projectID, ProjectOwner
	default:
		return ErrProjectNotFound
	}
	return nil
}

// errBadProjectID: a project id that is not a UUID names no project.
var errBadProjectID = errors.New("project id is not a UUID")

// projectParam is a wanted project id for a statement: nil for the
// personal project.
func projectParam(id string) (any, error) {
	if id == "" {
		return nil, nil
	}
	if uuid.Validate(id) != nil {
		return nil, errBadProjectID
	}
	return id, nil
}

// PersonalProject is the id of the account's personal project.
func PersonalProject(ctx context.Context, q db.DB, userID string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id::text FROM projects WHERE personal_of = $1`, userID).Scan(&id)
	return id, translate(err, ErrProjectNotFound)
}
