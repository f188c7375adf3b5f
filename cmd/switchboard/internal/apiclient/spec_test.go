package apiclient

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/web"
)

// route is what the client sends to and expects from one operation.
type route struct {
	op    Operation
	in    any      // request body type; nil: none
	out   any      // 2xx answer type; nil: none
	query []string // query parameters sent
}

var routes = []route{
	{op: OpLogin, in: Credentials{}, out: Session{}},
	{op: OpLogout},
	{op: OpMe, out: User{}},
	{op: OpTaskList, out: TaskPage{}, query: []string{"limit", "cursor", "kind"}},
	{op: OpTaskCreate, in: TaskCreate{}, out: Task{}},
	{op: OpTaskGet, out: Task{}},
	{op: OpTaskUpdate, in: TaskPatch{}, out: Task{}},
	{op: OpTaskDelete},
	{op: OpTaskTrigger, in: Trigger{}, out: Run{}},
	{op: OpTaskRuns, out: RunPage{}, query: []string{"limit", "cursor", "status"}},
	{op: OpTaskBackfill, in: Backfill{}, out: BackfillResult{}},
	{op: OpTaskRotate, in: RotateSecret{}, out: Task{}},
	{op: OpRunList, out: RunPage{}, query: []string{"limit", "cursor", "status"}},
	{op: OpRunGet, out: Run{}},
	{op: OpRunAttempts, out: AttemptList{}},
	{op: OpRunCancel, out: Run{}},
	{op: OpRunRetry, out: Run{}},
	{op: OpKeyList, out: APIKeyList{}},
	{op: OpKeyCreate, in: APIKeyCreate{}, out: APIKeyCreated{}},
	{op: OpKeyRevoke},
	{op: OpTicket, out: Ticket{}},
	{op: OpConnect, query: []string{"ticket"}},
}

// doc is the OpenAPI document as plain JSON values.
type doc = map[string]any

func spec(t *testing.T) doc {
	t.Helper()
	b, err := json.Marshal(web.Spec("test"))
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func obj(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// TestRoutesMatchTheDocument: every route the client calls is in the
// OpenAPI document under its operation id, with the query parameters the
// client sends, and its request and answer types have the schemas'
// fields, names and JSON types, both ways.
func TestRoutesMatchTheDocument(t *testing.T) {
	t.Parallel()
	d := spec(t)
	for _, r := range routes {
		t.Run(r.op.ID, func(t *testing.T) {
			t.Parallel()
			op := obj(d, "paths", r.op.Path, strings.ToLower(r.op.Method))
			if op == nil || op["operationId"] != r.op.ID {
				t.Fatalf("%s %s is not operation %s in the document (found %v)", r.op.Method, r.op.Path, r.op.ID, op["operationId"])
			}
			requireParams(t, op, r.query)
			requireBody(t, d, r.in, obj(op, "requestBody", "content", "application/json", "schema"), false)
			requireBody(t, d, r.out, answerSchema(op), true)
		})
	}
}

// TestEveryOperationIsChecked: a new Operation joins routes.
func TestEveryOperationIsChecked(t *testing.T) {
	t.Parallel()
	ids := map[string]bool{}
	for _, r := range routes {
		ids[r.op.ID] = true
	}
	for _, op := range []Operation{OpLogin, OpLogout, OpMe, OpTaskList, OpTaskCreate, OpTaskGet, OpTaskUpdate,
		OpTaskDelete, OpTaskTrigger, OpTaskRuns, OpTaskBackfill, OpTaskRotate, OpRunList, OpRunGet, OpRunAttempts,
		OpRunCancel, OpRunRetry, OpKeyList, OpKeyCreate, OpKeyRevoke, OpTicket, OpConnect} {
		if !ids[op.ID] {
			t.Errorf("operation %s is not checked against the document", op.ID)
		}
	}
}

func requireParams(t *testing.T, op map[string]any, names []string) {
	t.Helper()
	params, _ := op["parameters"].([]any)
	var have []string
	for _, p := range params {
		if obj(p)["in"] == "query" {
			have = append(have, obj(p)["name"].(string))
		}
	}
	for _, n := range names {
		if !slices.Contains(have, n) {
			t.Errorf("query parameter %q is not in the document (it has %v)", n, have)
		}
	}
}

// answerSchema is the schema of the operation's 2xx JSON answer, nil when
// it has none.
func answerSchema(op map[string]any) map[string]any {
	for code, res := range obj(op, "responses") {
		if strings.HasPrefix(code, "2") {
			if s := obj(res, "content", "application/json", "schema"); s != nil {
				return s
			}
		}
	}
	return nil
}

// requireBody compares a Go type with a schema; answer also requires each
// of the schema's properties in the type (so output shows every field).
func requireBody(t *testing.T, d doc, v any, schema map[string]any, answer bool) {
	t.Helper()
	if (v == nil) != (schema == nil) {
		t.Fatalf("client type %T, document schema %v: one has a body and the other none", v, schema)
	}
	if v != nil {
		requireType(t, d, reflect.TypeOf(v), schema, answer, reflect.TypeOf(v).Name())
	}
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

// requireType checks one Go type against one schema, recursively.
func requireType(t *testing.T, d doc, typ reflect.Type, schema map[string]any, answer bool, at string) {
	t.Helper()
	schema = resolve(d, schema)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if strings.HasPrefix(typ.Name(), "Nullable[") {
		typ = typ.Field(1).Type.Elem()
	}
	switch {
	case typ == rawType:
		return // any JSON
	case typ == timeType:
		requireJSONType(t, schema, "string", at)
	case typ.Kind() == reflect.Struct:
		requireFields(t, d, typ, schema, answer, at)
	case typ.Kind() == reflect.Slice:
		requireJSONType(t, schema, "array", at)
		requireType(t, d, typ.Elem(), obj(schema, "items"), answer, at+"[]")
	case typ.Kind() == reflect.Map:
		requireJSONType(t, schema, "object", at)
	case typ.Kind() == reflect.String:
		requireJSONType(t, schema, "string", at)
	case typ.Kind() == reflect.Bool:
		requireJSONType(t, schema, "boolean", at)
	default:
		requireJSONType(t, schema, "integer", at)
	}
}

// resolve follows a $ref; a oneOf becomes one object with every
// alternative's properties.
func resolve(d doc, s map[string]any) map[string]any {
	if ref, ok := s["$ref"].(string); ok {
		return resolve(d, obj(d, "components", "schemas", strings.TrimPrefix(ref, "#/components/schemas/")))
	}
	alts, ok := s["oneOf"].([]any)
	if !ok {
		return s
	}
	props := map[string]any{}
	for _, a := range alts {
		for k, v := range obj(resolve(d, obj(a)), "properties") {
			props[k] = v
		}
	}
	return map[string]any{"type": "object", "properties": props}
}

func requireJSONType(t *testing.T, schema map[string]any, want, at string) {
	t.Helper()
	switch ty := schema["type"].(type) {
	case string:
		if ty != want {
			t.Errorf("%s: client type is JSON %s, document %s", at, want, ty)
		}
	case []any:
		if !slices.Contains(ty, any(want)) {
			t.Errorf("%s: client type is JSON %s, document %v", at, want, ty)
		}
	default:
		t.Errorf("%s: the document gives no type (client: %s)", at, want)
	}
}

// requireFields checks a struct's JSON fields against an object schema.
func requireFields(t *testing.T, d doc, typ reflect.Type, schema map[string]any, answer bool, at string) {
	t.Helper()
	props := obj(schema, "properties")
	fields := jsonFields(typ)
	for name, f := range fields {
		p, ok := props[name]
		if !ok {
			t.Errorf("%s.%s is not a property of the document's schema", at, name)
			continue
		}
		requireType(t, d, f.Type, obj(p), answer, at+"."+name)
	}
	for name := range props {
		if _, ok := fields[name]; !ok && (answer || isRequired(schema, name)) {
			t.Errorf("%s has no field for the document's property %q", at, name)
		}
	}
}

func isRequired(schema map[string]any, name string) bool {
	req, _ := schema["required"].([]any)
	return slices.Contains(req, any(name))
}

// jsonFields are a struct's fields by JSON name, embedded ones flattened.
func jsonFields(typ reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name != "" && name != "-" {
			out[name] = f
		}
	}
	return out
}
