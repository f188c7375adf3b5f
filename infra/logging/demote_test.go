package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestDemoted: below warn a demoted logger's records come out at debug
// (hidden at info, shown at debug); warnings and errors keep their level,
// through With.
func TestDemoted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level string
		want  []string // "msg level" of the lines written
	}{
		{"info", []string{"careful WARN", "broken ERROR"}},
		{"debug", []string{"chatter DEBUG", "detail DEBUG", "careful WARN", "broken ERROR"}},
	} {
		var buf bytes.Buffer
		l := Demoted(New(&buf, "json", tc.level)).With("component", "river")
		l.Info("chatter")
		l.Debug("detail")
		l.Warn("careful")
		l.Error("broken")
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if m["component"] != "river" {
				t.Errorf("%s lost the logger's attributes", line)
			}
			got = append(got, m["msg"].(string)+" "+m["level"].(string))
		}
		if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
			t.Errorf("at %s: %v, want %v", tc.level, got, tc.want)
		}
	}
}
