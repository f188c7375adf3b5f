// Package mailtest runs a real SMTP server (github.com/emersion/go-smtp)
// for tests, on a loopback port, and hands over what it receives: the
// mail-sending code is tested against a server, never a mock of one.
package mailtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Options choose how the server talks; the zero value is plain SMTP
// without authentication.
type Options struct {
	// ImplicitTLS serves TLS from the first byte (smtps://).
	ImplicitTLS bool
	// StartTLS offers STARTTLS on a plain connection (smtp://).
	StartTLS bool
	// User and Password, when set, are required (AUTH PLAIN).
	User, Password string
}

// Mail is one message the server accepted.
type Mail struct {
	From    string
	To      []string
	Header  mail.Header
	Body    string // decoded from quoted-printable when so encoded
	WasTLS  bool
	AuthAs  string
	RawSize int
}

// Server is a running SMTP server.
type Server struct {
	Addr string
	// Roots trusts the server's certificate (for a client's tls.Config).
	Roots *x509.CertPool
	// Mail receives every accepted message.
	Mail chan Mail
	opts Options
}

// Start runs a server until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{Mail: make(chan Mail, 1000), opts: o}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		_, isTLS := c.TLSConnectionState()
		return &session{server: s, conn: c, tls: isTLS}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.AllowInsecureAuth = !o.ImplicitTLS && !o.StartTLS
	var l net.Listener
	var err error
	if o.ImplicitTLS || o.StartTLS {
		var cfg *tls.Config
		cfg, s.Roots = selfSigned(t)
		srv.TLSConfig = cfg
		if o.ImplicitTLS {
			l, err = tls.Listen("tcp", "127.0.0.1:0", cfg)
		}
	}
	if l == nil && err == nil {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatalf("mailtest: listen: %v", err)
	}
	s.Addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// URL is the SWITCHBOARD_SMTP_URL of this server with from as the sender.
func (s *Server) URL(from string) string {
	u := url.URL{Scheme: "smtp", Host: s.Addr, RawQuery: url.Values{"from": {from}}.Encode()}
	if s.opts.ImplicitTLS {
		u.Scheme = "smtps"
	}
	if s.opts.User != "" {
		u.User = url.UserPassword(s.opts.User, s.opts.Password)
	}
	return u.String()
}

// Next waits up to timeout for the next message.
func (s *Server) Next(t testing.TB, timeout time.Duration) Mail {
	t.Helper()
	select {
	case m := <-s.Mail:
		return m
	case <-time.After(timeout):
		t.Fatalf("mailtest: no mail within %s", timeout)
		return Mail{}
	}
}

type session struct {
	server *Server
	conn   *smtp.Conn
	tls    bool
	authAs string
	from   string
	to     []string
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.server.opts.User || pass != s.server.opts.Password {
			return errors.New("invalid credentials")
		}
		s.authAs = user
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.server.opts.User != "" && s.authAs == "" {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		return err
	}
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.server.Mail <- Mail{From: s.from, To: s.to, Header: msg.Header, Body: string(text), WasTLS: isTLS || s.tls, AuthAs: s.authAs, RawSize: len(raw)}
	return nil
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1 and localhost, and a pool
// that trusts it.
func selfSigned(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailtest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, pool
}
