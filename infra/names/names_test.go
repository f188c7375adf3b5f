package names

import (
	"strings"
	"testing"
)

func TestRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		room string
		ok   bool
	}{
		{"lobby", true},
		{"team ops", true},
		{"café", true},
		{strings.Repeat("r", MaxRoomBytes), true},
		{"", false},
		{" ", false},
		{"\t", false},
		{" lobby", false},
		{"lobby ", false},
		{strings.Repeat("r", MaxRoomBytes+1), false},
		{strings.Repeat("r", 150), false},
		{"a\x01b", false},
		{"a\x00b", false},
		{"a\u0085b", false}, // NEL, a C1 control
		{"a\xffb", false},
	} {
		if err := Room(tc.room); (err == nil) != tc.ok {
			t.Errorf("Room(%q) = %v, want ok %v", tc.room, err, tc.ok)
		}
	}
}

func TestEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		ok, clientOK bool
	}{
		{"report", true, true},
		{"billing.invoice:paid-v2_x", true, true},
		{"9lives", true, true},
		{strings.Repeat("e", MaxEventBytes), true, true},
		{"task.run.succeeded", true, false},
		{"rpc.call", true, false},
		{"server.draining", true, false},
		{"room.joined", true, false},
		{"", false, false},
		{" report", false, false},
		{"report ", false, false},
		{".report", false, false},
		{"re port", false, false},
		{"ré", false, false},
		{"a\x01", false, false},
		{strings.Repeat("e", MaxEventBytes+1), false, false},
	} {
		if err := Event(tc.name); (err == nil) != tc.ok {
			t.Errorf("Event(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err := ClientEvent(tc.name); (err == nil) != tc.clientOK {
			t.Errorf("ClientEvent(%q) = %v, want ok %v", tc.name, err, tc.clientOK)
		}
	}
}
