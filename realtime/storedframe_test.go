package realtime

import (
	"bytes"
	"testing"
	"time"

	"github.com/switchboard/switchboard/realtime/stream"
)

// storedFrame writes by hand what encoding the Frame struct writes.
func TestStoredFrameMatchesFrameEncoding(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 12, 1, 11, 0, 0, 123456000, time.FixedZone("x", 3600))
	cases := []stream.Event{
		{Stream: "user:5f0c3c8e-9f53-4c53-9a59-0f1f0e1a6b11", Offset: 7, Epoch: "3f9c0a1b2c4d", Event: "dm",
			ID: "a0c3c8e0-9f53-4c53-9a59-0f1f0e1a6b11", From: "b0c3c8e0-9f53-4c53-9a59-0f1f0e1a6b11", Payload: []byte(`{"text":"<hi> & \u2028 bye"}`), TS: ts},
		{Stream: "room:lobby \"quoted\" \u2029 é", Offset: 1, Epoch: "e", Event: "room.message", Payload: []byte(`[1,"x",null]`), TS: ts.Add(time.Nanosecond * 1000)},
		{Stream: "room:r", Offset: 0, Event: "", TS: time.Time{}},
		{Stream: "room:\x01\xff", Offset: 1 << 40, Epoch: "\"", Event: "tab\tname", Payload: []byte(`"s"`), TS: ts.Truncate(time.Second)},
	}
	for _, ev := range cases {
		user, room := streamTarget(ev.Stream)
		want, err := marshal(Frame{
			Event: ev.Event, Room: room, To: user, From: ev.From, ID: ev.ID, Payload: ev.Payload,
			TS: ev.TS.UTC().Format(time.RFC3339Nano), Stream: ev.Stream, Offset: ev.Offset, Epoch: ev.Epoch,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := storedFrame(ev); !bytes.Equal(got, want) {
			t.Errorf("storedFrame(%+v)\n got %s\nwant %s", ev, got, want)
		}
	}
}
