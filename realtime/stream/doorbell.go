package stream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DefaultDoorbellBytes is the largest doorbell EncodeDoorbells makes by
// default: under Postgres's 8000-byte NOTIFY limit with room to spare.
const DefaultDoorbellBytes = 7000

// Doorbell is a NOTIFY payload: what was appended, as offset ranges per
// stream, and for some ranges the events themselves. A replica that gets a
// range without bodies (or misses the doorbell altogether) reads the range
// from the store; a range's bodies are all there or absent, never partial.
type Doorbell struct {
	Origin string  `json:"o,omitempty"` // node that appended
	Ranges []Range `json:"r"`
}

// Range is the offsets First..Last (inclusive) of one stream's epoch.
type Range struct {
	Stream string `json:"s"`
	Epoch  string `json:"e"`
	First  int64  `json:"f"`
	Last   int64  `json:"l"`
	// Bodies of First..Last in order, or none.
	Bodies []Body `json:"b,omitempty"`
}

// Body is a stored event without the fields its range implies.
type Body struct {
	Event   string          `json:"v"`
	ID      string          `json:"i,omitempty"`
	From    string          `json:"u,omitempty"`
	Payload json.RawMessage `json:"p,omitempty"`
	TS      int64           `json:"t"` // Unix microseconds
}

// Events returns the range's events with every field set, or nil when it
// carries no bodies.
func (r Range) Events() []Event {
	if len(r.Bodies) == 0 {
		return nil
	}
	evs := make([]Event, len(r.Bodies))
	for i, b := range r.Bodies {
		evs[i] = Event{
			Stream: r.Stream, Epoch: r.Epoch, Offset: r.First + int64(i), Event: b.Event,
			ID: b.ID, From: b.From, Payload: []byte(b.Payload), TS: time.UnixMicro(b.TS).UTC(),
		}
	}
	return evs
}

// EncodeDoorbells describes appended events (Offset and Epoch set, as
// Append's positions give them) in as few doorbells of at most maxBytes
// (DefaultDoorbellBytes when zero) as it can. Consecutive offsets of a
// stream become one range; a range carries its bodies when they fit in one
// doorbell, otherwise it goes without them.
func EncodeDoorbells(origin string, events []Event, maxBytes int) ([]string, error) {
	maxBytes = cmp.Or(maxBytes, DefaultDoorbellBytes)
	head := fmt.Sprintf(`{"o":%s,"r":[`, quote(origin))
	if origin == "" {
		head = `{"r":[`
	}
	var out []string
	cur := []byte(head)
	for _, r := range ranges(events) {
		enc, err := encodeRange(r, maxBytes-len(head)-2)
		if err != nil {
			return nil, err
		}
		if len(enc) > maxBytes-len(head)-2 {
			return nil, fmt.Errorf("encode doorbell: %w: a range of %q does not fit in %d bytes", ErrInvalid, r.Stream, maxBytes)
		}
		if len(cur) > len(head) && len(cur)+1+len(enc)+2 > maxBytes {
			out = append(out, string(cur)+"]}")
			cur = []byte(head)
		}
		if len(cur) > len(head) {
			cur = append(cur, ',')
		}
		cur = append(cur, enc...)
	}
	if len(cur) > len(head) {
		out = append(out, string(cur)+"]}")
	}
	return out, nil
}

// ranges groups events into runs of consecutive offsets of one stream.
func ranges(events []Event) []Range {
	var rs []Range
	open := map[string]int{} // stream -> index of its latest range in rs
	for _, ev := range events {
		i, ok := open[ev.Stream]
		if !ok || rs[i].Epoch != ev.Epoch || rs[i].Last+1 != ev.Offset {
			rs = append(rs, Range{Stream: ev.Stream, Epoch: ev.Epoch, First: ev.Offset, Last: ev.Offset - 1})
			i = len(rs) - 1
			open[ev.Stream] = i
		}
		rs[i].Last = ev.Offset
		rs[i].Bodies = append(rs[i].Bodies, Body{
			Event: ev.Event, ID: ev.ID, From: ev.From, Payload: ev.Payload, TS: ev.TS.UnixMicro(),
		})
	}
	return rs
}

// encodeRange encodes r with its bodies if that fits in limit bytes,
// otherwise without them.
func encodeRange(r Range, limit int) ([]byte, error) {
	enc, err := marshal(r)
	if err != nil || len(enc) <= limit {
		return enc, err
	}
	r.Bodies = nil
	return marshal(r)
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, fmt.Errorf("encode doorbell: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func quote(s string) string {
	b, _ := marshal(s)
	return string(b)
}

// ErrBadDoorbell is a payload DecodeDoorbell cannot use.
var ErrBadDoorbell = errors.New("bad doorbell")

// DecodeDoorbell parses a doorbell and checks it is coherent: every range
// names a stream, First <= Last, and bodies are absent or one per offset.
func DecodeDoorbell(payload string) (Doorbell, error) {
	var d Doorbell
	if err := json.Unmarshal([]byte(payload), &d); err != nil {
		return Doorbell{}, fmt.Errorf("%w: %v", ErrBadDoorbell, err)
	}
	for i, r := range d.Ranges {
		switch {
		case r.Stream == "":
			return Doorbell{}, fmt.Errorf("%w: range %d has no stream", ErrBadDoorbell, i)
		case r.First < 1 || r.Last < r.First:
			return Doorbell{}, fmt.Errorf("%w: range %d is %d..%d", ErrBadDoorbell, i, r.First, r.Last)
		case len(r.Bodies) != 0 && int64(len(r.Bodies)) != r.Last-r.First+1:
			return Doorbell{}, fmt.Errorf("%w: range %d has %d bodies for %d offsets", ErrBadDoorbell, i, len(r.Bodies), r.Last-r.First+1)
		}
	}
	return d, nil
}
