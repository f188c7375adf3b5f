package accounts

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestDummyHashHasTheConfiguredCost: a login for an unknown address
// compares against the dummy hash, so its cost must be the configured
// one, or the time of a login tells whether an account exists.
func TestDummyHashHasTheConfiguredCost(t *testing.T) {
	t.Parallel()
	for _, cost := range []int{4, 9, 12, 31} {
		p := NewPasswords(PasswordOptions{Cost: cost})
		if got, err := bcrypt.Cost(p.dummy); err != nil || got != cost {
			t.Errorf("configured cost %d: the dummy hash has cost %d (%v)", cost, got, err)
		}
	}
	p := NewPasswords(PasswordOptions{Cost: 4})
	for _, pw := range []string{"", "switchboard-dummy-password", "correct horse"} {
		if ok, err := p.matches(context.Background(), p.dummy, pw); ok || err != nil {
			t.Errorf("the dummy hash matched %q (%v)", pw, err)
		}
	}
}

// TestHashingIsBounded: with every slot taken, a hash or a check waits its
// bound, then answers ErrHashingBusy; a slot coming free lets it through.
func TestHashingIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := NewPasswords(PasswordOptions{Cost: 4, Concurrency: 2, Wait: 50 * time.Millisecond})
	p.slots <- struct{}{}
	p.slots <- struct{}{}
	if p.InFlight() != 2 {
		t.Fatalf("in flight %d, want 2", p.InFlight())
	}
	start := time.Now()
	if _, err := p.Hash(ctx, "correct horse"); !errors.Is(err, ErrHashingBusy) {
		t.Fatalf("hash with every slot busy: %v, want ErrHashingBusy", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("gave up after %s, before its wait", waited)
	}
	if _, err := p.matches(ctx, p.dummy, "x"); !errors.Is(err, ErrHashingBusy) {
		t.Fatalf("check with every slot busy: %v, want ErrHashingBusy", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := NewPasswords(PasswordOptions{}).matches(ctx, p.dummy, "x") // another process's slots
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatalf("another Passwords is not bounded by this one's slots: %v", err)
	}
	<-p.slots
	if _, err := p.Hash(ctx, "correct horse"); err != nil {
		t.Fatalf("hash with a slot free: %v", err)
	}
	if p.InFlight() != 1 {
		t.Fatalf("in flight after the hash %d, want the 1 still held", p.InFlight())
	}
}
