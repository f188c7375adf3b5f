package accounts

import (
	"errors"
	"strings"
)

// NormalizeEmail is the one form of an email address that is stored, made
// unique and compared: the address trimmed of ASCII spaces, ASCII only,
// lower-cased (ASCII letters only), local@domain with a dot-atom local part
// (RFC 5322, no quoted strings or comments) and a hostname domain (labels of
// letters, digits and hyphens; an internationalised domain in its xn--
// form). Stored emails and the unique index hold exactly this string, and
// every lookup normalises its input the same way first, so the comparison is
// byte equality — no Unicode case folding, no Unicode normalisation, no
// database collation.
//
// Anything else is refused rather than guessed at: non-ASCII local parts
// have no agreed case folding (RFC 6531 leaves it to the receiving server),
// and Unicode folding or NFC would turn look-alikes into ASCII addresses
// (U+017F ſ folds to s, U+212A KELVIN SIGN is canonically K), so
// "opſ@example.com" must never become, or collide with, "ops@example.com".
func NormalizeEmail(s string) (string, error) {
	s = strings.Trim(s, " \t\r\n")
	if len(s) > 254 {
		return "", errors.New("an email address has at most 254 characters")
	}
	for i := range len(s) {
		if s[i] >= 0x80 {
			return "", errors.New("only ASCII email addresses are accepted: write an internationalised domain in its xn-- (punycode) form")
		}
	}
	local, domain, ok := strings.Cut(s, "@")
	if !ok || strings.Contains(domain, "@") {
		return "", errors.New("expected one address like name@example.com")
	}
	if err := checkLocalPart(local); err != nil {
		return "", err
	}
	if err := checkDomain(domain); err != nil {
		return "", err
	}
	return asciiLower(s), nil
}

// atext is RFC 5322's set of characters allowed in a dot-atom, besides
// letters and digits.
const atext = "!#$%&'*+-/=?^_`{|}~"

func checkLocalPart(local string) error {
	if local == "" || len(local) > 64 {
		return errors.New("the part before @ must have 1 to 64 characters")
	}
	for _, atom := range strings.Split(local, ".") {
		if atom == "" {
			return errors.New("the part before @ may not start or end with a dot, or hold two dots in a row")
		}
		for i := range len(atom) {
			if c := atom[i]; !isAlnum(c) && !strings.ContainsRune(atext, rune(c)) {
				return errors.New("the part before @ may hold only letters, digits and !#$%&'*+-/=?^_`{|}~ between dots")
			}
		}
	}
	return nil
}

func checkDomain(domain string) error {
	if domain == "" || len(domain) > 253 {
		return errors.New("the domain after @ must have 1 to 253 characters")
	}
	for _, label := range strings.Split(domain, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("the domain after @ must be a host name like example.com")
		}
		for i := range len(label) {
			if c := label[i]; !isAlnum(c) && c != '-' {
				return errors.New("the domain after @ may hold only letters, digits, hyphens and dots")
			}
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// asciiLower lower-cases A-Z only (strings.ToLower would also map Unicode,
// e.g. U+212A KELVIN SIGN to k).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
