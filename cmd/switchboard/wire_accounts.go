package main

import (
	"fmt"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/mail"
	"github.com/switchboard/switchboard/web"
)

// accountsWebOptions sets what the web front needs for accounts: the
// registration policy, the password hashing bound, where reset links point
// and, with SWITCHBOARD_SMTP_URL, the mail sender.
func (a *app) accountsWebOptions(o *web.Options) error {
	policy, err := accounts.ParseRegistration(a.cfg.Registration)
	if err != nil {
		return fmt.Errorf("SWITCHBOARD_REGISTRATION: %w", err)
	}
	o.Registration, o.PasswordConcurrency, o.PublicURL = policy, a.cfg.HashConcurrency, a.cfg.ResetLinkBase()
	o.Invites = accounts.Invites{}
	if a.cfg.SMTPURL == "" {
		return nil
	}
	sender, err := mail.Parse(a.cfg.SMTPURL)
	if err != nil {
		return fmt.Errorf("SWITCHBOARD_SMTP_URL: %w", err)
	}
	o.Mailer = sender
	return nil
}
