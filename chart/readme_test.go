package chart_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

// readmeMarker separates the chart README's hand-written part from the values table
// TestChartReadme generates below it.
const readmeMarker = "<!-- Everything below is generated from values.yaml and values.schema.json by readme_test.go: SWITCHBOARD_UPDATE_README=1 go test -run TestChartReadme . -->"

// valueDoc is one documented value: its path, JSON schema type, default and description.
type valueDoc struct {
	path, typ, def, desc string
	section              bool // a group of the values below it
}

// TestChartReadme fails when README.md's values table is not what values.yaml and
// values.schema.json say, or when a value has no description or no schema;
// SWITCHBOARD_UPDATE_README=1 rewrites the table.
func TestChartReadme(t *testing.T) {
	t.Parallel()
	docs, err := valueDocs()
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	head, _, found := strings.Cut(string(current), readmeMarker)
	if !found {
		t.Fatalf("README.md lacks the marker line %q", readmeMarker)
	}
	want := head + readmeMarker + "\n" + valuesTable(docs)
	if os.Getenv("SWITCHBOARD_UPDATE_README") != "" {
		if err := os.WriteFile("README.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(current) != want {
		t.Error("README.md's values table is out of date: SWITCHBOARD_UPDATE_README=1 go test -run TestChartReadme . in chart/")
	}
	for _, d := range docs {
		if d.section {
			continue
		}
		if d.desc == "" {
			t.Errorf("%s has no description: a comment above it in values.yaml, or a description in values.schema.json", d.path)
		}
		if d.typ == "" {
			t.Errorf("%s is not in values.schema.json", d.path)
		}
	}
}

func valueDocs() ([]valueDoc, error) {
	raw, err := os.ReadFile("values.yaml")
	if err != nil {
		return nil, err
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	b, err := os.ReadFile("values.schema.json")
	if err != nil {
		return nil, err
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		return nil, err
	}
	var out []valueDoc
	err = walkValues(doc.Content[0], schema, "", &out)
	return out, err
}

// walkValues documents every key of a mapping: a key whose schema lists properties is
// walked into (a row of its own, without a default, when it has a description); any
// other value (scalars, lists, free-form maps) is one row.
func walkValues(m *yamlv3.Node, schema map[string]any, prefix string, out *[]valueDoc) error {
	props, _ := schema["properties"].(map[string]any)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		path := prefix + k.Value
		sub, _ := props[k.Value].(map[string]any)
		desc := joinDesc(comment(k.HeadComment), comment(v.LineComment), strAt(sub, "description"))
		if _, walk := sub["properties"]; walk && v.Kind == yamlv3.MappingNode {
			if desc != "" {
				*out = append(*out, valueDoc{path: path, typ: "object", desc: desc, section: true})
			}
			if err := walkValues(v, sub, path+".", out); err != nil {
				return err
			}
			continue
		}
		var val any
		if err := v.Decode(&val); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		def, err := json.Marshal(val)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		*out = append(*out, valueDoc{path: path, typ: schemaType(sub), def: string(def), desc: desc})
	}
	return nil
}

// comment turns a YAML comment block into one line of text.
func comment(c string) string {
	var words []string
	for _, line := range strings.Split(c, "\n") {
		words = append(words, strings.Fields(strings.TrimLeft(strings.TrimSpace(line), "#"))...)
	}
	return strings.Join(words, " ")
}

func joinDesc(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

func strAt(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		var ts []string
		for _, x := range t {
			ts = append(ts, fmt.Sprint(x))
		}
		return strings.Join(ts, " or ")
	}
	if enum, ok := s["enum"].([]any); ok {
		var vs []string
		for _, v := range enum {
			b, _ := json.Marshal(v)
			vs = append(vs, string(b))
		}
		return "one of " + strings.Join(vs, ", ")
	}
	if s != nil {
		return "any"
	}
	return ""
}

func valuesTable(docs []valueDoc) string {
	var b bytes.Buffer
	b.WriteString("\n## Values\n\n| Key | Type | Default | Description |\n| --- | --- | --- | --- |\n")
	cell := strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;")
	for _, d := range docs {
		def := "`" + cell.Replace(d.def) + "`"
		if d.section {
			def = ""
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.path, d.typ, def, cell.Replace(d.desc))
	}
	return b.String()
}
