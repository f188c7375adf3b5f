package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// benchtimes are the packages' own settings when -benchtime is not given:
// benchmarks that set up a large fixture run once and measure inside.
var benchtimes = map[string]string{
	"./workers":  "1x", // fixed workloads: 1000 tasks for 10 s, 5000 jobs
	"./realtime": "1x", // fixed rates and 10 000 sockets
	"./jobs":     "1x", // ClaimRate: fixed numbers of due tasks
}

// result is one parsed benchmark line.
type result struct {
	Name       string // without the -GOMAXPROCS suffix
	Iterations int64
	Metrics    []metric
}

type metric struct {
	Value float64 // the median over Runs when a benchmark ran more than once
	Unit  string
	Runs  []float64 // every run's value, in run order (-count); nil for one run
}

func (r result) String() string {
	var b strings.Builder
	b.WriteString(r.Name)
	for _, m := range r.Metrics {
		fmt.Fprintf(&b, "  %s %s", formatValue(m.Value), m.Unit)
	}
	return b.String()
}

// meta is what go test says about the machine.
type meta struct {
	CPU string
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run switchboard-bench inside the switchboard module")
	}
	return filepath.Dir(mod), nil
}

// benchPackages lists ./dir for every directory of the module (not nested
// modules) whose test files declare benchmarks, with each benchmark's doc
// comment (what it measures, in its author's words).
func benchPackages(root string) (map[string]map[string]string, error) {
	pkgs := map[string]map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules" || exists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := strings.TrimSuffix("./"+filepath.ToSlash(rel), "/.")
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Benchmark") {
				continue
			}
			if pkgs[pkg] == nil {
				pkgs[pkg] = map[string]string{}
			}
			pkgs[pkg][strings.TrimPrefix(fn.Name.Name, "Benchmark")] = docOf(fn)
		}
		return nil
	})
	return pkgs, err
}

// docOf is a benchmark's doc comment on one line.
func docOf(fn *ast.FuncDecl) string {
	if fn.Doc == nil {
		return ""
	}
	doc := strings.Join(strings.Fields(fn.Doc.Text()), " ")
	if rest, ok := strings.CutPrefix(doc, fn.Name.Name+":"); ok {
		return strings.TrimSpace(rest) // "BenchmarkX: what it measures"
	}
	return doc
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// runPackage runs one package's benchmarks and parses them.
func runPackage(ctx context.Context, root, pkg string, o options) ([]result, meta, error) {
	args := []string{"test", "-run", "^$", "-bench", o.bench, "-count", strconv.Itoa(o.count), "-timeout", o.timeout.String()}
	if bt := o.benchtime; bt != "" {
		args = append(args, "-benchtime", bt)
	} else if bt, ok := benchtimes[pkg]; ok {
		args = append(args, "-benchtime", bt)
	}
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if o.verbose {
		fmt.Fprintf(os.Stderr, "  go %s\n", strings.Join(args, " "))
	}
	err := cmd.Run()
	if o.verbose {
		os.Stderr.Write(out.Bytes())
	}
	res, m := parse(out.String())
	if err != nil {
		return res, m, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, tail(out.String(), 15))
	}
	return res, m, nil
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse reads every `BenchmarkX  N  v unit  v unit ...` line; with -count
// above 1 repeated names are kept in order.
func parse(out string) ([]result, meta) {
	var res []result
	var m meta
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if cpu, ok := strings.CutPrefix(line, "cpu: "); ok {
			m.CPU = strings.TrimSpace(cpu)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue // a name printed alone (sub-benchmark parent, or log output)
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		r := result{Name: procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), ""), Iterations: n}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				r.Metrics = nil
				break
			}
			r.Metrics = append(r.Metrics, metric{Value: v, Unit: f[i+1]})
		}
		if len(r.Metrics) > 0 {
			res = append(res, r)
		}
	}
	return res, m
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
