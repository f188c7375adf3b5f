package realtime

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// TicketTTL is how long a WebSocket ticket stays valid.
const TicketTTL = 30 * time.Second

// Tickets issues and redeems single-use WebSocket tickets stored in
// ws_tickets. Only the SHA-256 of a ticket is stored.
type Tickets struct {
	DB db.DB
}

// Issue makes a ticket for userID: 32 random bytes, base64url.
func (t Tickets) Issue(ctx context.Context, userID string) (string, time.Time, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", time.Time{}, fmt.Errorf("issue ticket: %w", err)
	}
	hash := sha256.Sum256(raw)
	var exp time.Time
	err := t.DB.QueryRow(ctx, `
		INSERT INTO ws_tickets (hash, user_id, expires_at)
		VALUES ($1, $2, now() + make_interval(secs => $3))
		RETURNING expires_at`, hash[:], userID, TicketTTL.Seconds()).Scan(&exp)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("issue ticket: %w", db.Translate(err))
	}
	return base64.RawURLEncoding.EncodeToString(raw), exp.UTC(), nil
}

// Redeem validates a ticket and consumes it: the one atomic DELETE makes it
// valid once, on any replica. It returns the ticket's user or
// ErrTicketInvalid.
func (t Tickets) Redeem(ctx context.Context, ticket string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(ticket)
	if err != nil || len(raw) != 32 {
		return "", ErrTicketInvalid
	}
	hash := sha256.Sum256(raw)
	var userID string
	err = t.DB.QueryRow(ctx, `
		DELETE FROM ws_tickets WHERE hash = $1 AND expires_at > now()
		RETURNING user_id::text`, hash[:]).Scan(&userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrTicketInvalid
	}
	if err != nil {
		return "", fmt.Errorf("redeem ticket: %w", err)
	}
	return userID, nil
}

// ReapTickets deletes expired tickets (a maintenance task).
func ReapTickets(ctx context.Context, q db.DB) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM ws_tickets WHERE expires_at <= now()`)
	if err != nil {
		return 0, fmt.Errorf("reap tickets: %w", err)
	}
	return tag.RowsAffected(), nil
}
