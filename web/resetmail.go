package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/mail"
	"github.com/switchboard/switchboard/infra/ratelimit"
)

// Mailer sends one mail (infra/mail.Sender).
type Mailer interface {
	Send(ctx context.Context, m mail.Message) error
}

// resetMailerSlots bounds the forgot-password mails one replica prepares
// and sends at once; a request that finds them all busy is answered the
// same and sends nothing (logged and counted).
const resetMailerSlots = 8

// resetMailer does the work of POST /v1/auth/forgot after the answer: the
// lookup, the link and the mail, so the answer takes the same time whether
// or not the address has an account. At most resetMailerSlots run at
// once, and an address gets at most 3 links an hour (cluster-wide).
type resetMailer struct {
	s       *Server
	limit   *ratelimit.Limiter
	slots   chan struct{}
	wg      sync.WaitGroup
	logger  *slog.Logger
	outcome *prometheus.CounterVec
}

func (s *Server) newResetMailer() *resetMailer {
	m := &resetMailer{
		s:      s,
		limit:  s.limits.store.Limiter("forgot", ratelimit.Rate{PerSecond: 3.0 / 3600, Burst: 3}),
		slots:  make(chan struct{}, resetMailerSlots),
		logger: s.opts.Logger.With("component", "password_reset_mail"),
		outcome: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_password_reset_mails_total",
			Help: "POST /v1/auth/forgot requests by what followed: sent, no_account (unknown or disabled), limited (3 an hour per address), dropped (every slot busy), failed, not_configured.",
		}, []string{"outcome"}),
	}
	s.opts.Registry.MustRegister(m.outcome)
	return m
}

// enqueue starts the work for email, never waiting: a busy replica drops it.
func (m *resetMailer) enqueue(ctx context.Context, email string) {
	if m.s.opts.Mailer == nil {
		m.outcome.WithLabelValues("not_configured").Inc()
		m.logger.WarnContext(ctx, "a password reset mail was asked for, but mail is not configured (SWITCHBOARD_SMTP_URL): nothing sent")
		return
	}
	select {
	case m.slots <- struct{}{}:
	default:
		m.outcome.WithLabelValues("dropped").Inc()
		m.logger.WarnContext(ctx, "password reset mail dropped: every slot is busy")
		return
	}
	m.wg.Go(func() {
		defer func() { <-m.slots }()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*mail.DefaultTimeout)
		defer cancel()
		outcome, err := m.send(ctx, email)
		m.outcome.WithLabelValues(outcome).Inc()
		if err != nil {
			m.logger.ErrorContext(ctx, "password reset mail failed", "error", err)
		}
	})
}

// send mails a reset link to the enabled account with that address.
func (m *resetMailer) send(ctx context.Context, email string) (string, error) {
	if !m.limit.Allow(ctx, email).Allowed {
		return "limited", nil
	}
	u, err := accounts.UserByEmail(ctx, m.s.opts.Pool, email)
	switch {
	case errors.Is(err, accounts.ErrUserNotFound), err == nil && u.Disabled:
		return "no_account", nil
	case err != nil:
		return "failed", err
	}
	token, expires, err := accounts.NewPasswordReset(ctx, m.s.opts.Pool, u.ID)
	if err != nil {
		return "failed", err
	}
	err = m.s.opts.Mailer.Send(ctx, mail.Message{To: u.Email, Subject: "Reset your Switchboard password", Body: fmt.Sprintf(
		"Someone (hopefully you) asked to reset the password of the Switchboard account %s.\n\n"+
			"Open this link to choose a new password; it works once, until %s:\n\n%s\n\n"+
			"If you did not ask, ignore this mail: your password stays as it is.\n",
		u.Email, expires.UTC().Format("2006-01-02 15:04 MST"), accounts.ResetURL(m.s.opts.PublicURL, token))})
	if err != nil {
		return "failed", err
	}
	return "sent", nil
}

// Close waits for the forgot-password mail this server started after
// answering (each bounded by its timeout).
func (s *Server) Close() { s.resetMail.wg.Wait() }
