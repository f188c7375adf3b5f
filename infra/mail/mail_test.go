package mail_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/mail"
	"github.com/switchboard/switchboard/infra/testkit/mailtest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, err string
	}{
		{"smtp://mail.example.com?from=sb@example.com", ""},
		{"smtps://u:p@mail.example.com:2465?from=sb@example.com", ""},
		{"http://mail.example.com?from=sb@example.com", "scheme"},
		{"smtp://mail.example.com", "from="},
		{"smtp://mail.example.com?from=a%0d%0aBcc:x@example.com", "from="},
		{"smtp://?from=sb@example.com", "no host"},
		{"smtp://u:secret@[::1?from=x@example.com", "malformed"},
	} {
		_, err := mail.Parse(tc.url)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.url, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q) repeats the password: %v", tc.url, err)
		}
	}
}

func TestSend(t *testing.T) {
	t.Parallel()
	msg := mail.Message{To: "someone@example.com", Subject: "Hello", Body: "A line\nand a link: http://localhost:8080/console/#/reset?token=sbr_" + strings.Repeat("x", 80) + "\n"}
	for name, o := range map[string]mailtest.Options{
		"plain":                 {},
		"plain with auth":       {User: "sb", Password: "secret"},
		"STARTTLS offered":      {StartTLS: true, User: "sb", Password: "secret"},
		"implicit TLS (smtps)":  {ImplicitTLS: true, User: "sb", Password: "secret"},
		"implicit TLS, no auth": {ImplicitTLS: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := mailtest.Start(t, o)
			s, err := mail.Parse(srv.URL("switchboard@example.com"))
			if err != nil {
				t.Fatal(err)
			}
			s.TLS = &tls.Config{RootCAs: srv.Roots}
			if err := s.Send(context.Background(), msg); err != nil {
				t.Fatalf("send: %v", err)
			}
			got := srv.Next(t, 10*time.Second)
			if got.From != "switchboard@example.com" || len(got.To) != 1 || got.To[0] != msg.To || got.Header.Get("Subject") != "Hello" ||
				got.Body != strings.ReplaceAll(msg.Body, "\n", "\r\n") || got.AuthAs != o.User || got.WasTLS != (o.StartTLS || o.ImplicitTLS) {
				t.Fatalf("received %+v", got)
			}
		})
	}

	t.Run("wrong credentials are an error", func(t *testing.T) {
		t.Parallel()
		srv := mailtest.Start(t, mailtest.Options{User: "sb", Password: "secret"})
		s, _ := mail.Parse(strings.Replace(srv.URL("switchboard@example.com"), "secret", "wrong", 1))
		if err := s.Send(context.Background(), msg); err == nil {
			t.Fatal("sent with a wrong password")
		}
	})

	t.Run("an untrusted certificate is an error", func(t *testing.T) {
		t.Parallel()
		srv := mailtest.Start(t, mailtest.Options{ImplicitTLS: true})
		s, _ := mail.Parse(srv.URL("switchboard@example.com"))
		if err := s.Send(context.Background(), msg); err == nil {
			t.Fatal("sent to a server whose certificate nothing trusts")
		}
	})

	t.Run("a recipient that could inject a header is refused", func(t *testing.T) {
		t.Parallel()
		s, _ := mail.Parse("smtp://127.0.0.1:1?from=sb@example.com")
		if err := s.Send(context.Background(), mail.Message{To: "a@example.com\r\nBcc: b@example.com", Subject: "x"}); err == nil {
			t.Fatal("accepted")
		}
	})
}
