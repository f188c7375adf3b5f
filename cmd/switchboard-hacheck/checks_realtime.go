package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// checkTicket: a ticket issued on r1 connects on r2, and is refused (401)
// on r3 afterwards — single use, valid on any replica.
func (h *harness) checkTicket(ctx context.Context) (figures, error) {
	var f figures
	alice := h.users["alice"]
	t, err := h.ticket(ctx, alice, 0)
	if err != nil {
		return f, err
	}
	f.add("issued", "r1")
	conn, status, err := h.dial(ctx, 1, t)
	f.add("r2", status)
	if err != nil {
		return f, fmt.Errorf("ticket from r1 refused on r2: status %d: %w", status, err)
	}
	defer conn.Close()
	_, status, err = h.dial(ctx, 2, t)
	f.add("reuse_r3", status)
	if err == nil || status != http.StatusUnauthorized {
		return f, fmt.Errorf("a used ticket on r3: status %d (err %v), want 401", status, err)
	}
	_, status, _ = h.dial(ctx, 0, "not-a-ticket")
	f.add("unknown_r1", status)
	if status != http.StatusUnauthorized {
		return f, fmt.Errorf("an unknown ticket on r1: status %d, want 401", status)
	}
	return f, nil
}

// checkRunEvents: a socket on r1 receives task.run.running and
// task.run.succeeded for runs executed by other replicas' workers (which
// replica ran a job is read from the webhook call's socket).
func (h *harness) checkRunEvents(ctx context.Context) (figures, error) {
	var f figures
	alice := h.users["alice"]
	sock, err := h.openSocket(ctx, alice, 0, 0)
	if err != nil {
		return f, err
	}
	defer sock.close()
	var (
		events, remote, unknown, runs int
		lags                          []time.Duration
	)
	for round := 0; round < 3 && remote == 0; round++ {
		for i := range 4 {
			path := fmt.Sprintf("/ev/%d-%d", round, i)
			t, err := h.createTask(ctx, alice, i%3, webhookTask("hacheck-ev", manualOnly, h.rec.url(path, 0)))
			if err != nil {
				return f, err
			}
			rn, err := h.trigger(ctx, alice, 1+i%2, t.ID) // through r2 and r3
			if err != nil {
				return f, err
			}
			runs++
			for _, status := range []string{"running", "succeeded"} {
				ev, err := sock.waitFor(ctx, 15*time.Second, isRunEvent("task.run."+status, rn.ID))
				if err != nil {
					return f, fmt.Errorf("task.run.%s of run %s: %w", status, rn.ID, err)
				}
				events++
				if status == "succeeded" {
					if fin := payloadTime(ev, "finished_at"); !fin.IsZero() {
						lags = append(lags, ev.at.Sub(fin))
					}
				}
			}
			ds, _ := h.rec.waitFor(ctx, path, 2*time.Second, func(ds []delivery) bool { return len(ds) > 0 })
			switch {
			case len(ds) == 0 || ds[0].Replica < 0:
				unknown++
			case ds[0].Replica != 0:
				remote++
			}
		}
	}
	f.add("runs", runs)
	f.add("events", events)
	f.add("run_elsewhere", remote)
	if unknown > 0 {
		f.add("run_unknown", unknown)
	}
	f.add("lag_max", maxDur(lags))
	if remote == 0 && unknown < runs {
		return f, errors.New("every run executed on r1 itself in 3 rounds: nothing crossed replicas")
	}
	return f, nil
}

func isRunEvent(event, runID string) func(frame) bool {
	return func(fr frame) bool { return fr.Event == event && payloadField(fr, "id") == runID }
}

func payloadTime(fr frame, key string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, payloadField(fr, key))
	return t
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// checkDM: a DM sent by bob's socket on r3, and an event posted through r3's
// API, reach alice's sockets on r1 and r2 — and not carol's.
func (h *harness) checkDM(ctx context.Context) (figures, error) {
	var f figures
	alice, bob, carol := h.users["alice"], h.users["bob"], h.users["carol"]
	a1, err := h.openSocket(ctx, alice, 0, 0)
	if err != nil {
		return f, err
	}
	defer a1.close()
	a2, err := h.openSocket(ctx, alice, 1, 1)
	if err != nil {
		return f, err
	}
	defer a2.close()
	b3, err := h.openSocket(ctx, bob, 2, 2)
	if err != nil {
		return f, err
	}
	defer b3.close()
	c1, err := h.openSocket(ctx, carol, 0, 0)
	if err != nil {
		return f, err
	}
	defer c1.close()

	nonce := fmt.Sprintf("dm-%d", time.Now().UnixNano())
	sent := time.Now()
	if err := b3.send(frame{Event: "dm", To: alice.ID, Payload: []byte(`{"nonce":"` + nonce + `"}`)}); err != nil {
		return f, err
	}
	isDM := func(fr frame) bool { return fr.Event == "dm" && payloadField(fr, "nonce") == nonce }
	var errs []error
	for _, s := range []*socket{a1, a2} {
		fr, err := s.waitFor(ctx, 5*time.Second, isDM)
		if err != nil {
			errs = append(errs, fmt.Errorf("dm from r3: %w", err))
			continue
		}
		if fr.From != bob.ID {
			errs = append(errs, fmt.Errorf("dm on r%d has from=%q, want bob %s", s.replica+1, fr.From, bob.ID))
		}
		f.add(fmt.Sprintf("dm_r%d", s.replica+1), fr.at.Sub(sent))
	}

	apiNonce := fmt.Sprintf("api-%d", time.Now().UnixNano())
	sent = time.Now()
	body := map[string]any{"to": alice.ID, "event": "hacheck.ping", "payload": map[string]string{"nonce": apiNonce}}
	if err := h.expect(ctx, 2, http.MethodPost, "/v1/events", bob.Token, body, http.StatusAccepted, nil); err != nil {
		errs = append(errs, err)
	} else if fr, err := a1.waitFor(ctx, 5*time.Second, func(fr frame) bool {
		return fr.Event == "hacheck.ping" && payloadField(fr, "nonce") == apiNonce
	}); err != nil {
		errs = append(errs, fmt.Errorf("POST /v1/events on r3: %w", err))
	} else {
		f.add("api_r1", fr.at.Sub(sent))
	}

	time.Sleep(300 * time.Millisecond) // a leak would have arrived with the others
	leaked := c1.count(func(fr frame) bool {
		return strings.Contains(string(fr.Payload), nonce) || strings.Contains(string(fr.Payload), apiNonce)
	})
	f.add("leaked", leaked)
	if leaked > 0 {
		errs = append(errs, fmt.Errorf("carol received %d of alice's messages", leaked))
	}
	return f, errors.Join(errs...)
}
