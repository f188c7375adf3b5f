package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/switchboard/switchboard"

// TestImportGraph enforces the direction of dependencies (DESIGN.md
// "Layout"), on `go list -deps` of every package of the module:
// infra/* depends on no project package outside infra, accounts on none
// but infra, and nothing outside cmd depends on workers.
func TestImportGraph(t *testing.T) {
	t.Parallel()
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
			case under(rel, "accounts") && !under(depRel, "infra") && !under(depRel, "accounts"):
				t.Errorf("%s depends on %s: accounts may depend on infra only", rel, depRel)
			case under(depRel, "workers") && !under(rel, "cmd") && !under(rel, "workers"):
				t.Errorf("%s depends on workers: only cmd may", rel)
			}
		}
	}
}

// TestAdminCommandImports: the operator commands work on accounts through
// the accounts package, not through the HTTP front.
func TestAdminCommandImports(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "admin.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	uses := false
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		uses = uses || path == module+"/accounts"
		if path == module+"/web" || strings.HasPrefix(path, module+"/web/") {
			t.Errorf("admin.go imports %s: the admin command uses accounts, not web", path)
		}
	}
	if !uses {
		t.Error("admin.go does not import accounts: is this still the admin command?")
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
