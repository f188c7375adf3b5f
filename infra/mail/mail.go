// Package mail owns sending mail: a Sender delivers one message to one
// address through the SMTP server SWITCHBOARD_SMTP_URL names, over
// STARTTLS when the server offers it or over TLS from the first byte
// (smtps://), authenticated when the URL has credentials.
package mail

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"net/url"
	"strings"
	"time"
)

// DefaultTimeout bounds one delivery: connect, talk, send.
const DefaultTimeout = 30 * time.Second

// Sender sends mail through one SMTP server.
type Sender struct {
	addr        string // host:port
	host        string
	implicitTLS bool
	user, pass  string
	from        string
	// TLS verifies the server's certificate; nil: the system's roots and
	// the URL's host name.
	TLS *tls.Config
	// Timeout of one delivery; default DefaultTimeout.
	Timeout time.Duration
}

// Parse reads an SMTP URL: smtp://[user:password@]host[:port]?from=address
// (port 587 by default; STARTTLS when the server offers it) or smtps://…
// (port 465 by default; TLS from the first byte). from is the sender
// address and is required.
func Parse(raw string) (*Sender, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL, password included
		}
		return nil, fmt.Errorf("malformed: %v", err)
	}
	s := &Sender{host: u.Hostname(), from: u.Query().Get("from")}
	port := u.Port()
	switch u.Scheme {
	case "smtp":
		port = cmp.Or(port, "587")
	case "smtps":
		port, s.implicitTLS = cmp.Or(port, "465"), true
	default:
		return nil, fmt.Errorf("scheme %q: use smtp:// or smtps://", u.Scheme)
	}
	if s.host == "" {
		return nil, errors.New("no host")
	}
	if !plainAddress(s.from) {
		return nil, errors.New("from= must be the sender's address, like ?from=switchboard@example.com")
	}
	if u.User != nil {
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
	}
	s.addr = net.JoinHostPort(s.host, port)
	return s, nil
}

// plainAddress accepts a bare address with no characters that could end a
// header or an SMTP command.
func plainAddress(a string) bool {
	local, domain, ok := strings.Cut(a, "@")
	return ok && local != "" && domain != "" && !strings.ContainsAny(a, " \t\r\n<>,;\"")
}

// Message is one plain-text mail.
type Message struct {
	To, Subject, Body string
}

// Send delivers m, within ctx and the sender's timeout.
func (s *Sender) Send(ctx context.Context, m Message) error {
	if !plainAddress(m.To) || strings.ContainsAny(m.Subject, "\r\n") {
		return errors.New("send mail: a recipient or subject that cannot be a header")
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(s.Timeout, DefaultTimeout))
	defer cancel()
	c, err := s.dial(ctx)
	if err != nil {
		return fmt.Errorf("send mail: %w", err)
	}
	defer c.Close()
	if err := s.deliver(c, m); err != nil {
		return fmt.Errorf("send mail: %w", err)
	}
	return nil
}

// dial connects, over TLS for smtps, and says hello; the connection ends
// at ctx's deadline.
func (s *Sender) dial(ctx context.Context) (*smtp.Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if s.implicitTLS {
		conn = tls.Client(conn, s.tlsConfig())
	}
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (s *Sender) tlsConfig() *tls.Config {
	cfg := &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}
	if s.TLS != nil {
		cfg = s.TLS.Clone()
		cfg.ServerName = cmp.Or(cfg.ServerName, s.host)
	}
	return cfg
}

// deliver upgrades to TLS when offered, authenticates and sends m.
func (s *Sender) deliver(c *smtp.Client, m Message) error {
	if ok, _ := c.Extension("STARTTLS"); ok && !s.implicitTLS {
		if err := c.StartTLS(s.tlsConfig()); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
	}
	if s.user != "" {
		// net/smtp sends PLAIN credentials only over TLS or to localhost.
		if err := c.Auth(smtp.PlainAuth("", s.user, s.pass, s.host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	if err := c.Mail(s.from); err != nil {
		return err
	}
	if err := c.Rcpt(m.To); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(s.compose(m)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// compose writes m with its headers, the body quoted-printable.
func (s *Sender) compose(m Message) []byte {
	var b bytes.Buffer
	id := make([]byte, 16)
	_, _ = rand.Read(id) // never fails (crypto/rand)
	_, domain, _ := strings.Cut(s.from, "@")
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s@%s>\r\n",
		s.from, m.To, m.Subject, time.Now().Format(time.RFC1123Z), hex.EncodeToString(id), domain)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(m.Body, "\n", "\r\n")))
	_ = qp.Close()
	return b.Bytes()
}
