package jobs

import "testing"

func TestCheckJSONText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{`{"a":"plain"}`, true},
		{`{"a":"\u00e9\n\"\\"}`, true},
		{`{"a":"\ud83d\ude00"}`, true}, // a surrogate pair
		{`{"a":"\\u0000"}`, true},      // an escaped backslash, then text
		{`{"a":"\\\u0000"}`, false},
		{`{"a":"\u0000"}`, false},
		{`{"\u0000":1}`, false},
		{`["\ud800"]`, false},
		{`["\ud800x"]`, false},
		{`["\ud800\u0041"]`, false},
		{`["\udc00"]`, false},
		{`["\ud800\ud800"]`, false},
		{`["\uD83D\uDE00", "\uDFFF"]`, false},
		{`["\uDBFF\uDFFF"]`, true},
		{``, true},
		{`null`, true},
	} {
		if err := checkJSONText("f", []byte(tc.raw)); (err == nil) != tc.ok {
			t.Errorf("checkJSONText(%s) = %v, want ok %v", tc.raw, err, tc.ok)
		}
	}
}
