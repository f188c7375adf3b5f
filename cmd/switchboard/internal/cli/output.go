package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// isTerminal reports a character device: a terminal, not a pipe or file.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// table is rows of columns, printed aligned.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cols ...string) { t.rows = append(t.rows, cols) }

func (t *table) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.head, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// show prints v as indented JSON with -o json, else the table tab makes.
func (a *app) show(v any, tab func() *table) error {
	if a.output == "json" {
		return a.printJSON(v)
	}
	return tab().print(a.io.Stdout)
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.io.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONLine prints v as one line of JSON (a stream of events).
func (a *app) printJSONLine(v any) error {
	return json.NewEncoder(a.io.Stdout).Encode(v)
}

// fields is a two-column table of one object: name, value.
func fields(kv ...string) *table {
	t := &table{head: []string{"FIELD", "VALUE"}}
	for i := 0; i+1 < len(kv); i += 2 {
		t.add(kv[i], kv[i+1])
	}
	return t
}

// say prints a line for people: on stderr with -o json, so stdout stays
// JSON.
func (a *app) say(format string, args ...any) {
	w := a.io.Stdout
	if a.output == "json" {
		w = a.io.Stderr
	}
	fmt.Fprintf(w, format+"\n", args...)
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func orDash[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func raw(b json.RawMessage) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
