package stream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/switchboard/realtime/internal/wire"
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
// stream become one range carrying its bodies; a range too long for one
// doorbell is cut into consecutive ranges that each carry theirs, so a
// receiver that delivered the first goes on with the next without reading
// the store. Only an event whose body alone does not fit goes without it
// (consecutive such events as one range without bodies).
func EncodeDoorbells(origin string, events []Event, maxBytes int) ([]string, error) {
	maxBytes = cmp.Or(maxBytes, DefaultDoorbellBytes)
	head := doorbellHead(origin)
	limit := maxBytes - len(head) - 2
	var out []string
	cur := []byte(head)
	for _, r := range runs(events) {
		pieces, err := encodeRun(r, limit)
		if err != nil {
			return nil, err
		}
		for _, enc := range pieces {
			if len(cur) > len(head) && len(cur)+1+len(enc)+2 > maxBytes {
				out = append(out, string(cur)+"]}")
				cur = []byte(head)
			}
			if len(cur) > len(head) {
				cur = append(cur, ',')
			}
			cur = append(cur, enc...)
		}
	}
	if len(cur) > len(head) {
		out = append(out, string(cur)+"]}")
	}
	return out, nil
}

// doorbellHead is how every doorbell of origin starts, up to its ranges.
func doorbellHead(origin string) string {
	if origin == "" {
		return `{"r":[`
	}
	return `{"o":` + quote(origin) + `,"r":[`
}

// JoinDoorbells joins two doorbells of origin (as EncodeDoorbells wrote
// them) into one with a's ranges, then b's, when it is at most maxBytes
// (DefaultDoorbellBytes when zero): the publisher NOTIFYs fewer, fuller
// doorbells when appends come faster than it sends them.
func JoinDoorbells(origin, a, b string, maxBytes int) (string, bool) {
	head := doorbellHead(origin)
	maxBytes = cmp.Or(maxBytes, DefaultDoorbellBytes)
	ra, oka := doorbellRanges(head, a)
	rb, okb := doorbellRanges(head, b)
	if !oka || !okb || len(head)+len(ra)+1+len(rb)+2 > maxBytes {
		return "", false
	}
	return head + ra + "," + rb + "]}", true
}

// doorbellRanges is the ranges part of a doorbell written with head.
func doorbellRanges(head, d string) (string, bool) {
	if len(d) < len(head)+3 || d[:len(head)] != head || d[len(d)-2:] != "]}" {
		return "", false
	}
	return d[len(head) : len(d)-2], true
}

// runs groups events into runs of consecutive offsets of one stream's
// epoch, in the order each run starts.
func runs(events []Event) [][]Event {
	var rs [][]Event
	open := map[string]int{} // stream -> index of its latest run in rs
	for _, ev := range events {
		i, ok := open[ev.Stream]
		if ok {
			last := rs[i][len(rs[i])-1]
			ok = last.Epoch == ev.Epoch && last.Offset+1 == ev.Offset
		}
		if !ok {
			rs = append(rs, nil)
			i = len(rs) - 1
			open[ev.Stream] = i
		}
		rs[i] = append(rs[i], ev)
	}
	return rs
}

// encodeRun encodes a run as ranges of at most limit bytes each, with
// their bodies wherever one fits.
func encodeRun(run []Event, limit int) ([][]byte, error) {
	bodies := make([][]byte, len(run))
	for i, ev := range run {
		bodies[i] = appendBody(nil, ev)
	}
	var out [][]byte
	bare := -1 // first of the events going without bodies, if any
	flushBare := func(end int) error {
		if bare < 0 {
			return nil
		}
		enc := appendRangeHead(nil, run[bare], run[end-1].Offset)
		enc = append(enc, '}')
		if len(enc) > limit {
			return fmt.Errorf("encode doorbell: %w: a range of %q does not fit in %d bytes", ErrInvalid, run[0].Stream, limit)
		}
		out, bare = append(out, enc), -1
		return nil
	}
	for i := 0; i < len(run); {
		j := piece(run, bodies, i, limit)
		if j == i {
			if bare < 0 {
				bare = i
			}
			i++
			continue
		}
		if err := flushBare(i); err != nil {
			return nil, err
		}
		enc := appendRangeHead(nil, run[i], run[j-1].Offset)
		enc = append(enc, `,"b":[`...)
		for k := i; k < j; k++ {
			if k > i {
				enc = append(enc, ',')
			}
			enc = append(enc, bodies[k]...)
		}
		out = append(out, append(enc, ']', '}'))
		i = j
	}
	return out, flushBare(len(run))
}

// piece returns the end of the longest range from i whose encoding with
// bodies fits in limit bytes (i when not even one body fits).
func piece(run []Event, bodies [][]byte, i, limit int) int {
	size := len(appendRangeHead(nil, run[i], run[len(run)-1].Offset)) + len(`,"b":[]}`) - 1 // longest head, less one comma
	j := i
	for j < len(run) && size+1+len(bodies[j]) <= limit {
		size += 1 + len(bodies[j])
		j++
	}
	return j
}

// appendRangeHead appends a range's fields up to its last offset, without
// the closing brace: what json.Marshal(Range) writes first.
func appendRangeHead(b []byte, first Event, last int64) []byte {
	b = append(b, '{')
	b = wire.AppendField(b, true, "s", first.Stream)
	b = wire.AppendField(b, false, "e", first.Epoch)
	b = wire.AppendInt(b, false, "f", first.Offset)
	return wire.AppendInt(b, false, "l", last)
}

// appendBody appends ev as a Body, as json.Marshal(Body) writes it.
func appendBody(b []byte, ev Event) []byte {
	b = append(b, '{')
	b = wire.AppendField(b, true, "v", ev.Event)
	if ev.ID != "" {
		b = wire.AppendField(b, false, "i", ev.ID)
	}
	if ev.From != "" {
		b = wire.AppendField(b, false, "u", ev.From)
	}
	if len(ev.Payload) > 0 {
		b = wire.AppendRaw(b, false, "p", ev.Payload)
	}
	b = wire.AppendInt(b, false, "t", ev.TS.UnixMicro())
	return append(b, '}')
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
