package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func stdString(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	for b := range 0x80 {
		all.WriteByte(byte(b))
	}
	cases := []string{
		"", "plain", `quote " and backslash \`, "<html> & 'apos'", "tab\there\nnew\rret\bbs\fff",
		"\x00\x01\x1f\x7f", "é ü 日本 🎉", "line\u2028sep\u2029para", "bad \xff utf8 \xc3", "\xe2\x80",
		"room:lobby", "5f0c3c8e-9f53-4c53-9a59-0f1f0e1a6b11", all.String(), strings.Repeat("x\u2028\"", 50),
	}
	for _, s := range cases {
		if got, want := AppendString(nil, s), stdString(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("hello")
	f.Add("\xff\u2028\x00\"")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendString(nil, s), stdString(t, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}

func TestAppendFields(t *testing.T) {
	t.Parallel()
	b := append([]byte{'{'}, AppendField(nil, true, "s", "a\"b")...)
	b = AppendInt(b, false, "f", -12)
	b = AppendRaw(b, false, "p", []byte(`{"x":[1,2]}`))
	b = append(b, '}')
	if want := `{"s":"a\"b","f":-12,"p":{"x":[1,2]}}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}
