package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/switchboard/switchboard"

// TestImportGraph enforces the direction of dependencies (docs/design.md,
// "Components"), on `go list -deps` of every package of the module:
// infra/* depends on no project package outside infra, accounts on none
// but infra, nothing outside cmd depends on workers, and no package
// depends on the test kits (infra/testkit) but the kits themselves and the
// HA check, a test program; the command line (cmd/switchboard/internal/cli
// and apiclient) depends on no project package but its own: it talks to a
// server over the public API only.
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
			case under(depRel, "infra/testkit") && !under(rel, "infra/testkit") && rel != "cmd/switchboard-hacheck":
				t.Errorf("%s depends on the test kit %s: only tests and the HA check may", rel, depRel)
			case under(rel, cliDir) && !under(depRel, cliDir):
				t.Errorf("%s depends on %s: the command line talks to a server over the public API only", rel, depRel)
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

// cliDir holds the command line's packages.
const cliDir = "cmd/switchboard/internal"

func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// riverTables matches a name of River's tables or its insert notification
// channel.
var riverTables = regexp.MustCompile(`\briver_(job|queue|leader|client|insert)`)

// runWrites matches a write of task_runs or task_run_attempts.
var runWrites = regexp.MustCompile(`(?i)\b(insert\s+into|update|delete\s+from)\s+task_run(s|_attempts)\b`)

// TestRiverSchemaSeam: River's tables are named in SQL only in package
// jobs (riverschema.go holds every statement on them and pins River's
// version): a River upgrade has one place to check.
func TestRiverSchemaSeam(t *testing.T) {
	t.Parallel()
	for _, lit := range sqlLiterals(t) {
		if !under(lit.pkg, "jobs") && riverTables.MatchString(lit.text) {
			t.Errorf("%s names River's tables (%q): statements on them belong in jobs/riverschema.go", lit.pos, riverTables.FindString(lit.text))
		}
	}
}

// TestRunStateMachineFile: task_runs and task_run_attempts are written
// only by the run state machine, jobs/runstate.go.
func TestRunStateMachineFile(t *testing.T) {
	t.Parallel()
	for _, lit := range sqlLiterals(t) {
		if lit.file != "jobs/runstate.go" && runWrites.MatchString(lit.text) {
			t.Errorf("%s writes a run (%q): every transition of a run belongs in jobs/runstate.go", lit.pos, runWrites.FindString(lit.text))
		}
	}
}

// stringLiteral is a string constant in the module's non-test Go code.
type stringLiteral struct {
	file, pkg string // relative to the module root
	pos       string
	text      string
}

// sqlLiterals returns the string literals of every non-test, non-generated
// Go file of the module outside examples/ (where SQL lives, as Go code
// writes it).
func sqlLiterals(t *testing.T) []stringLiteral {
	t.Helper()
	root := strings.TrimSpace(strings.Join(goList(t, "-m", "-f", "{{.Dir}}"), " "))
	var out []stringLiteral
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || rel == "examples") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		lits, err := fileLiterals(path, rel)
		out = append(out, lits...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no string literals found: the walk read nothing")
	}
	return out
}

func fileLiterals(path, rel string) ([]stringLiteral, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil || ast.IsGenerated(f) {
		return nil, err
	}
	var out []stringLiteral
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		text, err := strconv.Unquote(lit.Value)
		if err != nil {
			text = lit.Value
		}
		out = append(out, stringLiteral{file: rel, pkg: filepath.ToSlash(filepath.Dir(rel)), pos: fset.Position(lit.Pos()).String(), text: text})
		return true
	})
	return out, nil
}
