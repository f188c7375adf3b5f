package accounts

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// A secret is a bearer string handed out once, of which only the SHA-256
// is stored: an API key (sbk_), a password reset link (sbr_), an invite
// (sbi_). It is its kind's prefix and 32 random bytes in unpadded
// base64url.
type secretKind string // the prefix

const secretBodyLen = 43 // 32 bytes, unpadded base64url

// newSecret makes a fresh secret of kind k.
func (k secretKind) newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return string(k) + base64.RawURLEncoding.EncodeToString(b)
}

// wellFormed checks a presented secret's shape, before any read.
func (k secretKind) wellFormed(s string) bool {
	if len(s) != len(k)+secretBodyLen || !strings.HasPrefix(s, string(k)) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s[len(k):])
	return err == nil
}

// hashSecret is what is stored of a secret and looked up by.
func hashSecret(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}
