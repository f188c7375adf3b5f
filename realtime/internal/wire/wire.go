// Package wire writes the JSON that stored events travel as (socket frames,
// doorbells) without reflection: the hot path of every stored event. What it
// writes is byte-for-byte what encoding/json writes with HTML escaping off.
package wire

import (
	"strconv"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped exactly as
// encoding/json escapes it with SetEscapeHTML(false): quotes, backslashes
// and control characters escaped, invalid UTF-8 replaced by U+FFFD,
// U+2028 and U+2029 escaped.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscapedByte(dst, b)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendEscapedByte(dst []byte, b byte) []byte {
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
}

// AppendField appends `,"name":` (no comma when first) and s as a JSON
// string.
func AppendField(dst []byte, first bool, name, s string) []byte {
	dst = appendKey(dst, first, name)
	return AppendString(dst, s)
}

// AppendInt appends `,"name":` and n.
func AppendInt(dst []byte, first bool, name string, n int64) []byte {
	dst = appendKey(dst, first, name)
	return strconv.AppendInt(dst, n, 10)
}

// AppendRaw appends `,"name":` and raw, a JSON value already compact and
// valid (a stored payload: the store compacted and checked it).
func AppendRaw(dst []byte, first bool, name string, raw []byte) []byte {
	dst = appendKey(dst, first, name)
	return append(dst, raw...)
}

// appendKey appends a key; names are plain ASCII identifiers.
func appendKey(dst []byte, first bool, name string) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}
