// Package names owns the rules for the names clients and tasks give
// realtime traffic: event names and room names. The API, the WebSocket
// frames and tasks' publish actions all check them here, so a name one of
// them accepts is one the others accept too.
package names

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of names.
const (
	MaxRoomBytes  = 128
	MaxEventBytes = 64
)

// ReservedPrefixes are event-name prefixes the server alone publishes.
var ReservedPrefixes = []string{"task.", "rpc.", "server.", "room.", "presence."}

// Room checks a room name: 1–128 bytes of valid UTF-8, no control
// characters, and no white space at either end (so " " is not a room, and
// " ops" is not a second "ops").
func Room(room string) error {
	switch {
	case room == "":
		return errors.New("room name is empty")
	case len(room) > MaxRoomBytes:
		return fmt.Errorf("room name is %d bytes; the limit is %d", len(room), MaxRoomBytes)
	case !utf8.ValidString(room):
		return errors.New("room name is not valid UTF-8")
	case strings.IndexFunc(room, unicode.IsControl) >= 0:
		return errors.New("room name contains control characters")
	case strings.TrimSpace(room) == "":
		return errors.New("room name is blank")
	case strings.TrimSpace(room) != room:
		return errors.New("room name starts or ends with white space")
	}
	return nil
}

// Event checks an event name: 1–64 bytes, a letter or digit first, then
// letters, digits and . _ : -
func Event(name string) error {
	switch {
	case name == "":
		return errors.New("event name is empty")
	case len(name) > MaxEventBytes:
		return fmt.Errorf("event name is %d bytes; the limit is %d", len(name), MaxEventBytes)
	case !isAlnum(name[0]):
		return fmt.Errorf("event name %q must start with a letter or digit", name)
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && !strings.ContainsRune("._:-", rune(c)) {
			return fmt.Errorf("event name %q may hold only letters, digits and . _ : -", name)
		}
	}
	return nil
}

// ClientEvent checks a name a user (or a user's task) publishes: a valid
// event name outside the reserved prefixes.
func ClientEvent(name string) error {
	if err := Event(name); err != nil {
		return err
	}
	if IsReserved(name) {
		return fmt.Errorf("event name %q is reserved: names starting %s belong to the server", name, strings.Join(ReservedPrefixes, ", "))
	}
	return nil
}

// IsReserved reports whether an event name belongs to the server.
func IsReserved(name string) bool {
	for _, p := range ReservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
