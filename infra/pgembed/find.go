// Package pgembed runs a private PostgreSQL server for the service's embedded
// mode and for tests: it finds installed binaries, initdb's a data directory
// once, starts postgres on a free loopback port as a non-root account, and
// stops it on shutdown. With no binaries installed it falls back to binaries
// downloaded by fergusstrange/embedded-postgres, in directories of their own.
package pgembed

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// FindBinDir returns a directory holding initdb and postgres, or "".
// It looks, in order, at PATH, `pg_config --bindir`, Debian's
// /usr/lib/postgresql/*/bin (newest first) and Homebrew/EDB locations.
func FindBinDir() string {
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	for _, pattern := range []string{
		"/usr/lib/postgresql/*/bin",
		"/usr/pgsql-*/bin",
		"/opt/homebrew/opt/postgresql@*/bin",
		"/usr/local/opt/postgresql@*/bin",
		"/Library/PostgreSQL/*/bin",
	} {
		candidates = append(candidates, newestFirst(pattern)...)
	}
	candidates = append(candidates,
		"/opt/homebrew/opt/postgresql/bin", "/usr/local/opt/postgresql/bin",
		"/opt/homebrew/bin", "/usr/local/pgsql/bin", "/usr/local/bin")
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir
		}
	}
	return ""
}

// newestFirst globs pattern and orders matches by the highest major version
// number found in the path.
func newestFirst(pattern string) []string {
	matches, _ := filepath.Glob(pattern)
	sort.SliceStable(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	return matches
}

func versionOf(path string) int {
	best := 0
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r < '0' || r > '9' }) {
		if n, err := strconv.Atoi(part); err == nil && n > best {
			best = n
		}
	}
	return best
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
