package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
)

// TestOpenAPIDocument fails when the document loses what API consumers and
// the linters rely on. Each failure names the operation and what it lacks,
// so a new route shows exactly what to add (Description, Tags, Security, an
// entry in operationExamples).
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	spec := Spec("test")
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}

	t.Run("document info, servers and tags", func(t *testing.T) {
		t.Parallel()
		if spec.Info.License == nil || spec.Info.License.URL == "" || spec.Info.Contact == nil || spec.Info.Contact.URL == "" {
			t.Errorf("info needs a license and a contact, each with a url: %+v %+v", spec.Info.License, spec.Info.Contact)
		}
		if len(spec.Servers) == 0 || spec.Servers[0].URL == "" {
			t.Error("servers is empty")
		}
		for _, tag := range spec.Tags {
			if tag.Description == "" {
				t.Errorf("tag %q has no description", tag.Name)
			}
		}
	})

	t.Run("action is a oneOf discriminated by type", func(t *testing.T) {
		t.Parallel()
		requireActionUnion(t, spec)
		for _, name := range []string{"Task", "TaskCreateBody", "TaskPatchBody"} {
			s := spec.Components.Schemas.Map()[name]
			if s == nil || s.Properties["action"] == nil || s.Properties["action"].Ref != schemaRef("Action") {
				t.Errorf("%s.action does not refer to the Action union", name)
			}
		}
	})

	t.Run("no array is nullable", func(t *testing.T) {
		t.Parallel()
		walkSchemas(doc, "#", func(path string, s map[string]any) {
			if isArray(s) && (s["nullable"] == true || hasType(s, "null")) {
				t.Errorf("%s: an array that may be null; lists are [] when empty", path)
			}
		})
	})

	t.Run("every operation is described, tagged, secured and has an example", func(t *testing.T) {
		t.Parallel()
		declared := map[string]bool{}
		for _, tag := range spec.Tags {
			declared[tag.Name] = true
		}
		for _, op := range operations(spec) {
			for _, problem := range operationProblems(op, declared) {
				t.Errorf("%s %s (%s): %s", op.Method, op.Path, op.OperationID, problem)
			}
		}
	})

	t.Run("every example is valid and attached", func(t *testing.T) {
		t.Parallel()
		ops := map[string]*huma.Operation{}
		for _, op := range operations(spec) {
			ops[op.OperationID] = op
		}
		for id, examples := range operationExamples {
			op := ops[id]
			if op == nil {
				t.Errorf("operationExamples names %q, which is no operation", id)
				continue
			}
			for _, ex := range examples {
				if err := checkExample(spec.Components.Schemas, op, ex); err != nil {
					t.Errorf("%s: example %s: %v", id, ex.where(), err)
				}
			}
		}
	})
}

func requireActionUnion(t *testing.T, spec *huma.OpenAPI) {
	t.Helper()
	schemas := spec.Components.Schemas.Map()
	action := schemas["Action"]
	if action == nil || len(action.OneOf) != 2 || action.Discriminator == nil || action.Discriminator.PropertyName != "type" {
		t.Fatalf("Action is not a oneOf of two schemas with a discriminator on type: %+v", action)
	}
	for typ, required := range map[string]string{"webhook": "url", "publish": "event"} {
		ref := action.Discriminator.Mapping[typ]
		s := spec.Components.Schemas.SchemaFromRef(ref)
		if s == nil || !slices.Contains(action.OneOf, &huma.Schema{Ref: ref}) && !refIn(action.OneOf, ref) {
			t.Errorf("discriminator maps %s to %q, which is not one of the union", typ, ref)
			continue
		}
		if !slices.Contains(s.Required, "type") || !slices.Contains(s.Required, required) {
			t.Errorf("%s requires %v; want type and %s", ref, s.Required, required)
		}
		if typeSchema := s.Properties["type"]; typeSchema == nil || !slices.Equal(typeSchema.Enum, []any{typ}) {
			t.Errorf("%s: type is not exactly %q", ref, typ)
		}
	}
}

func refIn(list []*huma.Schema, ref string) bool {
	return slices.ContainsFunc(list, func(s *huma.Schema) bool { return s.Ref == ref })
}

// operationProblems is what op lacks, empty when nothing.
func operationProblems(op *huma.Operation, declaredTags map[string]bool) []string {
	var problems []string
	if strings.TrimSpace(op.Description) == "" {
		problems = append(problems, "no Description")
	}
	if len(op.Tags) == 0 {
		problems = append(problems, "no Tags")
	}
	for _, tag := range op.Tags {
		if !declaredTags[tag] {
			problems = append(problems, fmt.Sprintf("tag %q is not declared in apiTags", tag))
		}
	}
	if op.Security == nil {
		problems = append(problems, "no Security (bearer, or public for a route anyone may call)")
	}
	for _, p := range op.Parameters {
		if p.In == "path" && (p.Name == "name" && strings.HasPrefix(op.Path, "/v1/rooms/")) { // a room name (RoomPath), not an id
			continue
		}
		if p.In == "path" && (p.Schema == nil || p.Schema.Type != huma.TypeString || p.Schema.Format != "uuid") {
			problems = append(problems, fmt.Sprintf("path parameter %q is not a uuid string (embed IDPath)", p.Name))
		}
	}
	if !hasExample(op) {
		problems = append(problems, "no example: add one to operationExamples")
	}
	return problems
}

func hasExample(op *huma.Operation) bool {
	var media []*huma.MediaType
	if op.RequestBody != nil {
		for _, m := range op.RequestBody.Content {
			media = append(media, m)
		}
	}
	for _, r := range op.Responses {
		for _, m := range r.Content {
			media = append(media, m)
		}
	}
	for _, m := range media {
		if m.Example != nil || len(m.Examples) > 0 {
			return true
		}
	}
	return slices.ContainsFunc(op.Parameters, func(p *huma.Param) bool { return p.Example != nil || len(p.Examples) > 0 })
}

// checkExample validates ex against the schema of where it is attached.
func checkExample(r huma.Registry, op *huma.Operation, ex example) error {
	var v any
	if err := json.Unmarshal([]byte(ex.value), &v); err != nil {
		return err
	}
	schema, mode, err := exampleSchema(op, ex)
	if err != nil {
		return err
	}
	res := &huma.ValidateResult{}
	huma.Validate(r, schema, huma.NewPathBuffer(nil, 0), mode, v, res)
	if len(res.Errors) > 0 {
		return fmt.Errorf("does not match its schema: %v", res.Errors)
	}
	return nil
}

func exampleSchema(op *huma.Operation, ex example) (*huma.Schema, huma.ValidateMode, error) {
	switch {
	case ex.param != "":
		for _, p := range op.Parameters {
			if p.Name == ex.param && p.Example != nil {
				return p.Schema, huma.ModeWriteToServer, nil
			}
		}
		return nil, 0, fmt.Errorf("no parameter %q holds it", ex.param)
	case ex.status == 0:
		if op.RequestBody != nil {
			if m := op.RequestBody.Content["application/json"]; m != nil && len(m.Examples) > 0 {
				return m.Schema, huma.ModeWriteToServer, nil
			}
		}
		return nil, 0, fmt.Errorf("the operation has no JSON request body")
	}
	if r := op.Responses[strconv.Itoa(ex.status)]; r != nil {
		for _, m := range r.Content {
			if len(m.Examples) > 0 && m.Schema != nil {
				return m.Schema, huma.ModeReadFromServer, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("the operation has no %d response with a body", ex.status)
}

func (ex example) where() string {
	switch {
	case ex.param != "":
		return "of parameter " + ex.param
	case ex.status == 0:
		return "of the request body"
	}
	return "of the " + strconv.Itoa(ex.status) + " response"
}

func operations(spec *huma.OpenAPI) []*huma.Operation {
	var ops []*huma.Operation
	for _, item := range spec.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Options, item.Head, item.Patch, item.Trace} {
			if op != nil {
				ops = append(ops, op)
			}
		}
	}
	return ops
}

// walkSchemas calls fn on every JSON object under doc that looks like a
// schema (has type or nullable), with its JSON pointer.
func walkSchemas(node any, path string, fn func(path string, s map[string]any)) {
	switch n := node.(type) {
	case map[string]any:
		if _, ok := n["type"]; ok {
			fn(path, n)
		}
		for k, v := range n {
			walkSchemas(v, path+"/"+strings.ReplaceAll(k, "/", "~1"), fn)
		}
	case []any:
		for i, v := range n {
			walkSchemas(v, path+"/"+strconv.Itoa(i), fn)
		}
	}
}

func isArray(s map[string]any) bool { return hasType(s, "array") }

func hasType(s map[string]any, want string) bool {
	switch t := s["type"].(type) {
	case string:
		return t == want
	case []any:
		return slices.Contains(t, any(want))
	}
	return false
}

// TestActionValidation: the union rejects an incomplete action with a 422
// that names the missing field, before jobs' Normalize sees it; Normalize
// still refuses what a schema cannot say.
func TestActionValidation(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	token, _ := b.register(t, "action-union@example.com")
	for name, tc := range map[string]struct {
		action   map[string]any
		location string
		says     string
	}{
		"webhook without url":          {map[string]any{"type": "webhook"}, "body.action", "required property url"},
		"publish without event":        {map[string]any{"type": "publish", "room": "r"}, "body.action", "required property event"},
		"webhook with a publish field": {map[string]any{"type": "webhook", "url": "https://example.com/h", "event": "x"}, "body.action.event", "unexpected property"},
		"no type":                      {map[string]any{"url": "https://example.com/h"}, "body.action.type", "present"},
		"unknown type":                 {map[string]any{"type": "email", "url": "https://example.com/h"}, "body.action", "exactly one schema"},
		"loopback url (Normalize)":     {map[string]any{"type": "webhook", "url": "http://127.0.0.1/h"}, "body.action.url", "loopback"},
	} {
		res := b.do(t, http.MethodPost, "/v1/tasks", map[string]any{"name": "x", "action": tc.action}, token)
		requireProblem(t, res, http.StatusUnprocessableEntity)
		if !problemAt(res, tc.location, tc.says) {
			t.Errorf("%s: no error at %s saying %q: %s", name, tc.location, tc.says, res.raw)
		}
	}
	t.Run("both shapes are accepted", func(t *testing.T) {
		t.Parallel()
		b.createTask(t, token, map[string]any{"name": "hook", "action": map[string]any{"type": "webhook", "url": "https://example.com/h"}})
		b.createTask(t, token, map[string]any{"name": "pub", "action": map[string]any{"type": "publish", "event": "report.ready"}})
	})
}

// problemAt reports an error detail at location whose message has says.
func problemAt(res response, location, says string) bool {
	errs, _ := res.body["errors"].([]any)
	for _, e := range errs {
		m, _ := e.(map[string]any)
		if msg, _ := m["message"].(string); m["location"] == location && strings.Contains(msg, says) {
			return true
		}
	}
	return false
}
