package jobs

import (
	"encoding/json"
	"strings"
)

// Postgres stores neither a NUL in text nor a \u0000 or a lone UTF-16
// surrogate in jsonb: a task holding one is refused here, with the field's
// name, rather than by the INSERT.

// checkText refuses a NUL in a text field.
func checkText(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "%s may not contain NUL characters", field)
	}
	return nil
}

// StorableJSON reports whether raw is a JSON document PostgreSQL's jsonb
// takes: valid, without \u0000 or unpaired surrogate escapes.
func StorableJSON(raw []byte) bool {
	return json.Valid(raw) && checkJSONText("", raw) == nil
}

// checkJSONText refuses \u0000 and unpaired surrogate escapes in raw, which
// is valid JSON (so a backslash only ever starts an escape in a string).
func checkJSONText(field string, raw []byte) error {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		i++ // the escaped character
		if raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		switch {
		case !ok:
			continue
		case r == 0:
			return invalid(field, "%s may not contain \\u0000", field)
		case r >= 0xDC00 && r <= 0xDFFF:
			return invalid(field, "%s holds a lone UTF-16 surrogate \\u%04x", field, r)
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := hex4(raw, i+7) // after "XXXX\u"
			if !ok || i+6 >= len(raw) || raw[i+5] != '\\' || raw[i+6] != 'u' || low < 0xDC00 || low > 0xDFFF {
				return invalid(field, "%s holds a lone UTF-16 surrogate \\u%04x", field, r)
			}
			i += 10
			continue
		}
		i += 4
	}
	return nil
}

// hex4 reads the four hex digits at raw[i:i+4].
func hex4(raw []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// checkStorable runs checkText and checkJSONText over every field of t that
// reaches the database as text or jsonb.
func (t *Task) checkStorable() error {
	a := &t.Action
	for _, f := range []struct{ field, v string }{
		{"name", t.Name}, {"schedule", ptrValue(t.Schedule)}, {"timezone", t.Timezone}, {"overlap", t.Overlap},
		{"action.type", a.Type}, {"action.url", a.URL}, {"action.method", a.Method},
		{"action.event", a.Event}, {"action.room", a.Room},
	} {
		if err := checkText(f.field, f.v); err != nil {
			return err
		}
	}
	for k, v := range a.Headers {
		if checkText("action.headers", k) != nil || checkText("action.headers", v) != nil {
			return invalid("action.headers", "action.headers may not contain NUL characters")
		}
	}
	if err := checkJSONText("action.body", a.Body); err != nil {
		return err
	}
	return checkJSONText("action.payload", a.Payload)
}

// ptrValue is *p, or the zero value for nil.
func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
