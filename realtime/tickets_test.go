package realtime

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestTickets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("valid once, stored hashed", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		tickets := Tickets{DB: tx}
		user := dbtest.User(t, tx, nil).ID
		ticket, exp, err := tickets.Issue(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err := base64.RawURLEncoding.DecodeString(ticket); err != nil || len(raw) != 32 {
			t.Fatalf("ticket %q is not 32 bytes of base64url", ticket)
		}
		if d := time.Until(exp); d < 25*time.Second || d > 35*time.Second {
			t.Fatalf("expires in %s, want ~30 s", d)
		}
		var stored []byte
		if err := tx.QueryRow(ctx, `SELECT hash FROM ws_tickets WHERE user_id = $1`, user).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(ticket)
		if sum := sha256.Sum256(raw); string(stored) != string(sum[:]) {
			t.Fatal("stored value is not the SHA-256 of the ticket")
		}
		got, err := tickets.Redeem(ctx, ticket)
		if err != nil || got != user {
			t.Fatalf("redeem: %q %v", got, err)
		}
		if _, err := tickets.Redeem(ctx, ticket); !errors.Is(err, ErrTicketInvalid) {
			t.Fatalf("second redeem: %v, want ErrTicketInvalid", err)
		}
	})

	t.Run("unknown and malformed", func(t *testing.T) {
		t.Parallel()
		tickets := Tickets{DB: dbtest.NewTx(t)}
		for _, ticket := range []string{"", "nope", "!!!!", base64.RawURLEncoding.EncodeToString(make([]byte, 32))} {
			if _, err := tickets.Redeem(ctx, ticket); !errors.Is(err, ErrTicketInvalid) {
				t.Errorf("redeem %q: %v, want ErrTicketInvalid", ticket, err)
			}
		}
	})

	t.Run("expired is refused and reaped", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		tickets := Tickets{DB: tx}
		user := dbtest.User(t, tx, nil).ID
		ticket, _, err := tickets.Issue(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `UPDATE ws_tickets SET expires_at = now() - interval '1 second' WHERE user_id = $1`, user); err != nil {
			t.Fatal(err)
		}
		if _, err := tickets.Redeem(ctx, ticket); !errors.Is(err, ErrTicketInvalid) {
			t.Fatalf("expired ticket: %v, want ErrTicketInvalid", err)
		}
		n, err := ReapTickets(ctx, tx)
		if err != nil || n != 1 {
			t.Fatalf("reap: %d %v, want 1", n, err)
		}
	})

	t.Run("concurrent redeem: exactly one wins", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		tickets := Tickets{DB: pool}
		user := dbtest.User(t, pool, nil).ID
		for range 5 {
			ticket, _, err := tickets.Issue(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			wins := 0
			for range 8 {
				wg.Go(func() {
					if got, err := tickets.Redeem(ctx, ticket); err == nil && got == user {
						mu.Lock()
						wins++
						mu.Unlock()
					} else if !errors.Is(err, ErrTicketInvalid) {
						t.Errorf("redeem: %v", err)
					}
				})
			}
			wg.Wait()
			if wins != 1 {
				t.Fatalf("%d redeems won, want exactly 1", wins)
			}
		}
	})
}
