package metrics

import (
	"cmp"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfo(t *testing.T) {
	t.Parallel()
	t.Run("stamped", func(t *testing.T) {
		t.Parallel()
		want := `switchboard_build_info{goversion="` + runtime.Version() + `",revision="abc123",version="v1.2.3"} 1`
		r := NewRegistry()
		r.MustRegister(BuildInfo("v1.2.3", "abc123"))
		if err := testutil.GatherAndCompare(r, strings.NewReader(
			"# HELP switchboard_build_info Always 1; the labels name the build: version, goversion, revision.\n"+
				"# TYPE switchboard_build_info gauge\n"+want+"\n"), "switchboard_build_info"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unstamped revision", func(t *testing.T) {
		t.Parallel()
		// Test binaries carry no VCS stamp: the revision says so.
		if got := testutil.ToFloat64(BuildInfo("dev", "")); got != 1 {
			t.Fatalf("build_info = %v, want 1", got)
		}
		r := NewRegistry()
		r.MustRegister(BuildInfo("dev", ""))
		families, err := r.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "switchboard_build_info" {
				continue
			}
			for _, l := range f.GetMetric()[0].GetLabel() {
				if l.GetName() == "revision" && l.GetValue() != cmp.Or(vcsRevision(), "unknown") {
					t.Fatalf("revision = %q", l.GetValue())
				}
			}
			return
		}
		t.Fatal("switchboard_build_info not gathered")
	})
}
