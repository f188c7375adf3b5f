// Command switchboard-bench runs every `go test -bench` benchmark in the
// module in one go (each reports its figures with b.ReportMetric, next to a
// baseline measured in the same run: raw River jobs, httprate's in-memory
// counter, same-replica delivery) and writes docs/benchmarks.md: each figure
// beside its baseline, with the machine's core count, the date and the Go
// version. Benchmarks are found by `func Benchmark` in the module's test
// files and parsed generically (any `BenchmarkX  N  <value> <unit> ...` line),
// so they can be renamed or added without touching this command.
//
//	go run ./cmd/switchboard-bench                   # writes docs/benchmarks.md
//	go run ./cmd/switchboard-bench -bench Lag -out -  # one benchmark, to stdout
//	go run ./cmd/switchboard-bench -bench Stored -keep # rerun a subset; other packages' sections stay
//	go run ./cmd/switchboard-bench -count 3            # each figure as min / median / max of 3 runs
//
// With -count above 1 every figure is printed as min / median / max over
// the runs, and a ratio to a baseline is taken run by run (each run beside
// the baseline measured in the same go test process) before its spread is
// printed. Each package's section records the load average when it started
// and ended.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"time"
)

type options struct {
	bench     string
	benchtime string
	count     int
	out       string
	timeout   time.Duration
	verbose   bool
	keep      bool
}

func main() {
	os.Exit(realMain())
}

func realMain() int {
	var o options
	flag.StringVar(&o.bench, "bench", ".", "regexp of the benchmarks to run (go test -bench)")
	flag.StringVar(&o.benchtime, "benchtime", "", "go test -benchtime for every package (default: each package's setting in this command)")
	flag.IntVar(&o.count, "count", 1, "go test -count")
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "where to write the report, relative to the module root; - for stdout")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "go test -timeout per package")
	flag.BoolVar(&o.verbose, "v", false, "echo go test's output")
	flag.BoolVar(&o.keep, "keep", false, "keep the sections of packages this run measures nothing in from the existing -out file (with their date), so a -bench subset updates the report instead of replacing it (a package this run measures is rewritten whole)")
	flag.Parse()
	if _, err := regexp.Compile(o.bench); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard-bench: -bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard-bench:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, o options) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	pkgs, err := benchPackages(root)
	if err != nil {
		return err
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("no func Benchmark in any test file under %s", root)
	}
	rep := newReport(ctx)
	if o.keep && o.out != "-" {
		old, err := os.ReadFile(filepath.Join(root, o.out))
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		rep.keep(string(old))
	}
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		fmt.Fprintf(os.Stderr, "· %s\n", pkg)
		loadStart := loadAverage()
		res, meta, err := runPackage(ctx, root, pkg, o)
		rep.add(pkg, pkgs[pkg], res, meta, err, [2]string{loadStart, loadAverage()})
		if err != nil {
			fmt.Fprintf(os.Stderr, "  %v\n", err)
		}
		for _, r := range res {
			fmt.Fprintf(os.Stderr, "  %s\n", r)
		}
	}
	md := rep.markdown(o)
	if o.out == "-" {
		fmt.Print(md)
	} else {
		path := filepath.Join(root, o.out)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	}
	if rep.failed > 0 {
		return fmt.Errorf("%d package(s) failed; their errors are in the report", rep.failed)
	}
	return nil
}
