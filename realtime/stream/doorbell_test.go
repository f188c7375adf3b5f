package stream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/realtime/stream"
)

// stored returns n events of s from offset first, as Append would have
// numbered them.
func stored(s, epoch string, first int64, n int, payload string) []stream.Event {
	evs := make([]stream.Event, n)
	for i := range evs {
		evs[i] = stream.Event{
			Stream: s, Epoch: epoch, Offset: first + int64(i), Event: "dm", ID: uuid.NewString(),
			From: uuid.NewString(), Payload: []byte(payload), TS: time.UnixMicro(1_700_000_000_000_000 + int64(i)).UTC(),
		}
	}
	return evs
}

func decodeAll(t *testing.T, payloads []string, maxBytes int) []stream.Doorbell {
	t.Helper()
	ds := make([]stream.Doorbell, len(payloads))
	for i, p := range payloads {
		if len(p) > maxBytes {
			t.Fatalf("doorbell %d is %d bytes, the limit is %d", i, len(p), maxBytes)
		}
		d, err := stream.DecodeDoorbell(p)
		if err != nil {
			t.Fatalf("decode %q: %v", p, err)
		}
		ds[i] = d
	}
	return ds
}

func TestDoorbell(t *testing.T) {
	t.Parallel()

	t.Run("small bodies ride along and decode to the stored events", func(t *testing.T) {
		t.Parallel()
		a, b := userStream(), roomStream()
		evs := append(stored(a, "ea", 4, 2, `{"text":"<hi> & bye"}`), stored(b, "eb", 9, 1, "")...)
		evs = append(evs, stored(a, "ea", 6, 1, `[1,2]`)...)
		ps, err := stream.EncodeDoorbells("node-1", evs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 1 || !strings.Contains(ps[0], `<hi> & bye`) {
			t.Fatalf("doorbells %q: want one, payload unescaped", ps)
		}
		d := decodeAll(t, ps, stream.DefaultDoorbellBytes)[0]
		if d.Origin != "node-1" || len(d.Ranges) != 2 {
			t.Fatalf("doorbell %+v", d)
		}
		ra, rb := d.Ranges[0], d.Ranges[1]
		if ra.Stream != a || ra.Epoch != "ea" || ra.First != 4 || ra.Last != 6 || rb.Stream != b || rb.First != 9 || rb.Last != 9 {
			t.Fatalf("ranges %+v %+v", ra, rb)
		}
		want := append(stored(a, "ea", 4, 0, ""), evs[0], evs[1], evs[3])
		if got := ra.Events(); !reflect.DeepEqual(got, want) {
			t.Fatalf("events of %s:\n got %+v\nwant %+v", a, got, want)
		}
		if got := rb.Events(); len(got) != 1 || got[0].Payload != nil || got[0].Offset != 9 {
			t.Fatalf("events of %s: %+v", b, got)
		}
	})

	t.Run("a range too big for bodies goes without them; many ranges split into several doorbells", func(t *testing.T) {
		t.Parallel()
		big := userStream()
		evs := stored(big, "e", 1, 3, `"`+strings.Repeat("x", 3000)+`"`)
		var small []string
		for range 60 {
			s := roomStream()
			small = append(small, s)
			evs = append(evs, stored(s, "e", 1, 1, `{"n":1}`)...)
		}
		const limit = 2000
		ps, err := stream.EncodeDoorbells("", evs, limit)
		if err != nil {
			t.Fatal(err)
		}
		ds := decodeAll(t, ps, limit)
		if len(ds) < 2 {
			t.Fatalf("%d doorbells for 61 ranges under %d bytes", len(ds), limit)
		}
		var ranges []stream.Range
		for _, d := range ds {
			ranges = append(ranges, d.Ranges...)
		}
		if len(ranges) != 61 || ranges[0].Stream != big || ranges[0].Bodies != nil || ranges[0].Last != 3 {
			t.Fatalf("first range %+v of %d", ranges[0], len(ranges))
		}
		for i, s := range small {
			if r := ranges[i+1]; r.Stream != s || len(r.Events()) != 1 {
				t.Fatalf("range %d = %+v, want %s with its body", i+1, r, s)
			}
		}
	})

	t.Run("a range too long for one doorbell is cut into ranges that carry their bodies", func(t *testing.T) {
		t.Parallel()
		s := userStream()
		evs := stored(s, "e", 41, 300, `{"text":"see you at the standup in five minutes","n":42}`)
		ps, err := stream.EncodeDoorbells("node-1", evs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) < 2 {
			t.Fatalf("%d doorbells for 300 events of ~150 bytes", len(ps))
		}
		var got []stream.Event
		next := int64(41)
		for _, d := range decodeAll(t, ps, stream.DefaultDoorbellBytes) {
			for _, r := range d.Ranges {
				if r.Stream != s || r.First != next || r.Bodies == nil {
					t.Fatalf("range %s %d..%d (bodies %v), want %s from %d with bodies", r.Stream, r.First, r.Last, r.Bodies != nil, s, next)
				}
				got = append(got, r.Events()...)
				next = r.Last + 1
			}
		}
		if !reflect.DeepEqual(got, evs) {
			t.Fatalf("the doorbells' events differ from the stored ones")
		}
	})

	t.Run("between bodies that fit, one that does not goes alone without its body", func(t *testing.T) {
		t.Parallel()
		s := roomStream()
		evs := stored(s, "e", 1, 2, `{"n":1}`)
		evs = append(evs, stored(s, "e", 3, 2, `"`+strings.Repeat("x", 3000)+`"`)...)
		evs = append(evs, stored(s, "e", 5, 1, `{"n":5}`)...)
		ps, err := stream.EncodeDoorbells("n", evs, 2000)
		if err != nil {
			t.Fatal(err)
		}
		var ranges []string
		for _, d := range decodeAll(t, ps, 2000) {
			for _, r := range d.Ranges {
				ranges = append(ranges, fmt.Sprintf("%d..%d:%d", r.First, r.Last, len(r.Bodies)))
			}
		}
		if got := strings.Join(ranges, " "); got != "1..2:2 3..4:0 5..5:1" {
			t.Fatalf("ranges %s, want 1..2:2 3..4:0 5..5:1", got)
		}
	})

	t.Run("doorbells are what encoding the Doorbell struct writes", func(t *testing.T) {
		t.Parallel()
		evs := stored(roomStream()+` \\ \u2028   "`, `ep\\"`, 9, 3, `{"t":"<b> & é"}`)
		evs[1].ID, evs[2].From, evs[2].Payload = "", "", nil
		ps, err := stream.EncodeDoorbells(`node "1"`, evs, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := stream.Doorbell{Origin: `node "1"`, Ranges: []stream.Range{{Stream: evs[0].Stream, Epoch: evs[0].Epoch, First: 9, Last: 11}}}
		for _, ev := range evs {
			d.Ranges[0].Bodies = append(d.Ranges[0].Bodies, stream.Body{Event: ev.Event, ID: ev.ID, From: ev.From, Payload: ev.Payload, TS: ev.TS.UnixMicro()})
		}
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(d); err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSuffix(buf.String(), "\n"); len(ps) != 1 || ps[0] != want {
			t.Fatalf("doorbells %q\nwant %q", ps, want)
		}
	})

	t.Run("two doorbells join into one with the ranges of both, in order, when it fits", func(t *testing.T) {
		t.Parallel()
		s := userStream()
		first, err := stream.EncodeDoorbells("node-1", stored(s, "e", 1, 2, `{"n":1}`), 0)
		if err != nil {
			t.Fatal(err)
		}
		second, err := stream.EncodeDoorbells("node-1", stored(s, "e", 3, 1, `{"n":3}`), 0)
		if err != nil {
			t.Fatal(err)
		}
		joined, ok := stream.JoinDoorbells("node-1", first[0], second[0], 0)
		if !ok {
			t.Fatalf("%q and %q not joined", first[0], second[0])
		}
		d := decodeAll(t, []string{joined}, stream.DefaultDoorbellBytes)[0]
		if d.Origin != "node-1" || len(d.Ranges) != 2 || d.Ranges[0].First != 1 || d.Ranges[0].Last != 2 || d.Ranges[1].First != 3 || len(d.Ranges[1].Events()) != 1 {
			t.Fatalf("joined doorbell %+v", d)
		}
		if _, ok := stream.JoinDoorbells("node-1", first[0], second[0], len(joined)-1); ok {
			t.Fatal("joined past the limit")
		}
		if _, ok := stream.JoinDoorbells("node-2", first[0], second[0], 0); ok {
			t.Fatal("joined doorbells of another origin")
		}
		if _, ok := stream.JoinDoorbells("node-1", first[0], `{"o":"node-1","n":1,"k":"e"}`, 0); ok {
			t.Fatal("joined a doorbell with something else")
		}
	})

	t.Run("a limit too small for one bare range is an error", func(t *testing.T) {
		t.Parallel()
		_, err := stream.EncodeDoorbells("n", stored(userStream(), "e", 1, 1, ""), 40)
		if !errors.Is(err, stream.ErrInvalid) {
			t.Fatalf("error %v, want ErrInvalid", err)
		}
	})

	t.Run("what a doorbell carries equals what Read returns", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		s := roomStream()
		in := []stream.Event{
			{Stream: s, Event: "room.message", ID: uuid.NewString(), From: uuid.NewString(), Payload: []byte(` { "t" : "é \u00e9 <b>" } `)},
			{Stream: s, Event: "room.message", Payload: []byte(`null`)},
			{Stream: s, Event: "x", TS: time.Now().Add(-time.Hour)},
		}
		ps := mustAppend(t, tx, in...)
		read := mustRead(t, tx, s, 0, 0).Events
		if got := stream.Stored(in, ps); !reflect.DeepEqual(got, read) {
			t.Fatalf("Stored differs from Read:\n got %+v\nread %+v", got, read)
		}
		doorbells, err := stream.EncodeDoorbells("n", stream.Stored(in, ps), 0)
		if err != nil {
			t.Fatal(err)
		}
		rang := decodeAll(t, doorbells, stream.DefaultDoorbellBytes)[0].Ranges[0]
		if got := rang.Events(); !reflect.DeepEqual(got, read) {
			t.Fatalf("doorbell events differ from Read's:\n got %+v\nread %+v", got, read)
		}
		if string(read[0].Payload) != `{"t":"é \u00e9 <b>"}` || !read[2].TS.Equal(in[2].TS.Truncate(time.Microsecond)) {
			t.Fatalf("stored %q at %v", read[0].Payload, read[2].TS)
		}
	})

	t.Run("nothing appended, no doorbell", func(t *testing.T) {
		t.Parallel()
		if ps, err := stream.EncodeDoorbells("n", nil, 0); err != nil || len(ps) != 0 {
			t.Fatalf("%q %v", ps, err)
		}
	})
}

func TestDecodeDoorbellRefuses(t *testing.T) {
	t.Parallel()
	body := `{"v":"dm","t":1}`
	for _, p := range []string{
		``,
		`not json`,
		`{"r":[{"e":"x","f":1,"l":1}]}`,
		`{"r":[{"s":"room:a","e":"x","f":0,"l":1}]}`,
		`{"r":[{"s":"room:a","e":"x","f":3,"l":2}]}`,
		fmt.Sprintf(`{"r":[{"s":"room:a","e":"x","f":1,"l":3,"b":[%s,%s]}]}`, body, body),
		`{"r":[{"s":"room:a","e":"x","f":"1","l":1}]}`,
	} {
		if _, err := stream.DecodeDoorbell(p); !errors.Is(err, stream.ErrBadDoorbell) {
			t.Errorf("DecodeDoorbell(%q) = %v, want ErrBadDoorbell", p, err)
		}
	}
}
