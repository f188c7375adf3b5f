package accounts

import (
	"strings"
	"testing"
)

func TestNormalizeEmail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"New@Example.com", "new@example.com"},
		{" \tops@example.com\r\n", "ops@example.com"},
		{"x+tag@xn--bcher-kva.de", "x+tag@xn--bcher-kva.de"},
		{"first.last!#$%&'*/=?^_`{|}~-@a-b.example", "first.last!#$%&'*/=?^_`{|}~-@a-b.example"},
		{"a@localhost", "a@localhost"},
		{strings.Repeat("a", 64) + "@example.com", strings.Repeat("a", 64) + "@example.com"},
	} {
		got, err := NormalizeEmail(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"opſ@example.com",       // U+017F folds to s
		"o\u212a@example.com",   // KELVIN SIGN: NFC and ToLower make it k
		"ops@exämple.com",       // IDN not in xn-- form
		"ｏｐｓ@example.com",       // full width
		"ops\u00a0@example.com", // no-break space
		"ops\x00@example.com",
		"", "@", "a@", "@example.com", "a@@example.com", "a@b@example.com",
		`"quoted"@example.com`, "a b@example.com", "(c)a@example.com",
		".a@example.com", "a.@example.com", "a..b@example.com",
		"a@-example.com", "a@example-.com", "a@example..com", "a@example.com.", "a@exa_mple.com", "a@[127.0.0.1]",
		strings.Repeat("a", 65) + "@example.com",
		"a@" + strings.Repeat("b", 64) + ".com",
		"a@" + strings.Repeat(strings.Repeat("b", 60)+".", 5) + "com",
	} {
		if got, err := NormalizeEmail(in); err == nil {
			t.Errorf("NormalizeEmail(%q) = %q, want a refusal", in, got)
		}
	}
}
