package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportGraph enforces the direction of dependencies (DESIGN.md
// "Layout"), on `go list -deps` of every package of the module:
// infra/* depends on no project package outside infra, and nothing outside
// cmd depends on workers.
func TestImportGraph(t *testing.T) {
	t.Parallel()
	const module = "github.com/switchboard/switchboard"
	pkgs := goList(t, "-f", "{{.ImportPath}}", module+"/...")
	for _, pkg := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		deps := goList(t, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg)
		for _, dep := range deps {
			depRel, ours := strings.CutPrefix(dep, module+"/")
			switch {
			case !ours || dep == pkg:
			case under(rel, "infra") && !under(depRel, "infra"):
				t.Errorf("%s depends on %s: infra may depend on infra only", rel, depRel)
			case under(depRel, "workers") && !under(rel, "cmd") && !under(rel, "workers"):
				t.Errorf("%s depends on workers: only cmd may", rel)
			}
		}
	}
}

func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}
