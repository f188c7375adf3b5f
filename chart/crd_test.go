package chart_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// customObject is a rendered object of a kind client-go does not know, backed by a CRD
// vendored in testdata/crds; raw is the whole document as JSON values.
type customObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	raw map[string]any
}

// customKinds are the operator kinds the chart renders, validated against testdata/crds.
var customKinds = map[string]bool{
	"keda.sh/v1alpha1 ScaledObject":           true,
	"keda.sh/v1alpha1 TriggerAuthentication":  true,
	"postgresql.cnpg.io/v1 Cluster":           true,
	"postgresql.cnpg.io/v1 Pooler":            true,
	"postgresql.cnpg.io/v1 ScheduledBackup":   true,
	"barmancloud.cnpg.io/v1 ObjectStore":      true,
	"monitoring.coreos.com/v1 PrometheusRule": true,
}

func decodeCustom(doc []byte, head metav1.TypeMeta) (customObject, error) {
	o := customObject{TypeMeta: head}
	// Strict: duplicate keys fail, as they would in kubectl apply --validate=strict.
	if err := yaml.UnmarshalStrict(doc, &o.raw); err != nil {
		return o, err
	}
	var withMeta struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              json.RawMessage `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(doc, &withMeta); err != nil {
		return o, fmt.Errorf("metadata: %w", err)
	}
	o.ObjectMeta = withMeta.ObjectMeta
	return o, nil
}

// findCustom returns the rendered custom object of that kind and name.
func findCustom(r rendered, kind, name string) (customObject, bool) {
	for _, o := range r.custom {
		if o.Kind == kind && o.Name == name {
			return o, true
		}
	}
	return customObject{}, false
}

func getCustom(t *testing.T, r rendered, kind, name string) customObject {
	t.Helper()
	o, ok := findCustom(r, kind, name)
	if !ok {
		var have []string
		for _, c := range r.custom {
			have = append(have, c.Kind+"/"+c.Name)
		}
		t.Fatalf("no %s named %q; rendered custom objects: %v", kind, name, have)
	}
	return o
}

// crd is one served version of a vendored CustomResourceDefinition.
type crd struct {
	file   string
	schema *jsonschema.Schema
	tree   map[string]any // the openAPIV3Schema, for its CEL rules
}

// loadCRDs compiles the openAPIV3Schema of every served version in testdata/crds, keyed
// by "group/version Kind".
var loadCRDs = sync.OnceValues(func() (map[string]crd, error) {
	files, err := filepath.Glob("testdata/crds/*.yaml")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in testdata/crds (%v)", err)
	}
	out := map[string]crd{}
	for _, f := range files {
		if err := addCRD(out, f); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return out, nil
})

func addCRD(out map[string]crd, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var def struct {
		Kind string `json:"kind"`
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &def); err != nil {
		return err
	}
	if def.Kind != "CustomResourceDefinition" {
		return fmt.Errorf("kind %q, want CustomResourceDefinition", def.Kind)
	}
	for _, v := range def.Spec.Versions {
		if !v.Served || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		tree := v.Schema.OpenAPIV3Schema
		doc, err := roundTrip(structural(deepCopy(tree)))
		if err != nil {
			return err
		}
		c := jsonschema.NewCompiler()
		url := "file:///" + v.Name + "/" + filepath.Base(file)
		if err := c.AddResource(url, doc); err != nil {
			return err
		}
		sch, err := c.Compile(url)
		if err != nil {
			return fmt.Errorf("compile %s: %w", v.Name, err)
		}
		out[def.Spec.Group+"/"+v.Name+" "+def.Spec.Names.Kind] = crd{file: filepath.Base(file), schema: sch, tree: tree}
	}
	return nil
}

// structural turns a CRD's structural schema into the JSON Schema the API server
// enforces with strict field validation (kubectl apply's default, --validate=strict):
//   - an object schema with properties and no additionalProperties admits no other
//     fields (the API server prunes or, strictly, rejects unknown fields), unless it has
//     x-kubernetes-preserve-unknown-fields;
//   - nullable: true admits null.
//
// Everything else (types, enums, patterns, required, min/max, int-or-string's anyOf) is
// JSON Schema already; the x-kubernetes-* keywords are ignored by the validator.
func structural(node any) any {
	m, ok := node.(map[string]any)
	if !ok {
		return node
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, v := range props {
			props[k] = structural(v)
		}
		if _, has := m["additionalProperties"]; !has && m["x-kubernetes-preserve-unknown-fields"] != true {
			m["additionalProperties"] = false
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		if sub, ok := m[k].(map[string]any); ok {
			m[k] = structural(sub)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := m[k].([]any); ok {
			for i := range subs {
				subs[i] = structural(subs[i])
			}
		}
	}
	if m["nullable"] == true {
		if t, ok := m["type"].(string); ok {
			m["type"] = []any{t, "null"}
		}
	}
	return m
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// roundTrip gives the validator JSON values in its own representation (json.Number).
func roundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// validateCustom checks o against its CRD's schema and the CEL rules its fields reach.
func validateCustom(o customObject) error {
	crds, err := loadCRDs()
	if err != nil {
		return err
	}
	def, ok := crds[o.APIVersion+" "+o.Kind]
	if !ok {
		return fmt.Errorf("no vendored CRD serves %s %s (testdata/crds)", o.APIVersion, o.Kind)
	}
	inst, err := roundTrip(o.raw)
	if err != nil {
		return err
	}
	if err := def.schema.Validate(inst); err != nil {
		return fmt.Errorf("%s/%s does not match %s: %v", o.Kind, o.Name, def.file, err)
	}
	var errs []string
	walkCEL(def.tree, o.raw, o.Kind, &errs)
	if len(errs) > 0 {
		return fmt.Errorf("%s/%s: %s", o.Kind, o.Name, strings.Join(errs, "; "))
	}
	return nil
}

// celRules are the x-kubernetes-validations rules of the vendored CRDs that a rendered
// field can reach, written in Go (the test does not embed a CEL interpreter). Rules with
// oldSelf are transition rules, not evaluated on create. A reached rule missing here fails
// the test, so a new rule in an updated CRD is looked at rather than skipped.
var celRules = map[string]func(self map[string]any) error{
	// ScaledObject spec.
	`!has(self.minReplicaCount) || self.minReplicaCount <= (has(self.maxReplicaCount) ? self.maxReplicaCount : 100)`: func(self map[string]any) error {
		lo, hasLo := self["minReplicaCount"].(float64)
		hi, hasHi := self["maxReplicaCount"].(float64)
		if !hasHi {
			hi = 100
		}
		if hasLo && lo > hi {
			return fmt.Errorf("minReplicaCount %v > maxReplicaCount %v", lo, hi)
		}
		return nil
	},
	// Cluster spec.
	`!(has(self.imageCatalogRef) && has(self.imageName))`: exclusive("imageCatalogRef", "imageName"),
	// Cluster spec.bootstrap.initdb.
	`!has(self.builtinLocale) || self.localeProvider == 'builtin'`: onlyWith("builtinLocale", "localeProvider", "builtin"),
	`!has(self.icuLocale) || self.localeProvider == 'icu'`:         onlyWith("icuLocale", "localeProvider", "icu"),
	`!has(self.icuRules) || self.localeProvider == 'icu'`:          onlyWith("icuRules", "localeProvider", "icu"),
	// Pooler spec.pgbouncer (and the like).
	`!(has(self.image) && has(self.imageCatalogRef))`: exclusive("image", "imageCatalogRef"),
	// ObjectStore spec.configuration: the folder name is the Cluster's serverName plugin parameter.
	`!has(self.serverName)`: forbidden("serverName"),
}

func forbidden(field string) func(map[string]any) error {
	return func(self map[string]any) error {
		if _, has := self[field]; has {
			return fmt.Errorf("%s must not be set", field)
		}
		return nil
	}
}

func exclusive(a, b string) func(map[string]any) error {
	return func(self map[string]any) error {
		_, hasA := self[a]
		_, hasB := self[b]
		if hasA && hasB {
			return fmt.Errorf("%s and %s are mutually exclusive", a, b)
		}
		return nil
	}
}

func onlyWith(field, other, value string) func(map[string]any) error {
	return func(self map[string]any) error {
		if _, has := self[field]; has && self[other] != value {
			return fmt.Errorf("%s needs %s %q", field, other, value)
		}
		return nil
	}
}

// walkCEL follows obj through schema and applies the CEL rules of every node present.
func walkCEL(schema map[string]any, obj any, at string, errs *[]string) {
	if rules, ok := schema["x-kubernetes-validations"].([]any); ok {
		for _, r := range rules {
			rule := strings.Join(strings.Fields(r.(map[string]any)["rule"].(string)), " ")
			if strings.Contains(rule, "oldSelf") {
				continue
			}
			check, ok := celRules[rule]
			self, isMap := obj.(map[string]any)
			switch {
			case !ok || !isMap:
				*errs = append(*errs, fmt.Sprintf("%s reaches CEL rule %q, which celRules does not evaluate", at, rule))
			default:
				if err := check(self); err != nil {
					*errs = append(*errs, fmt.Sprintf("%s: %v (rule %q)", at, err, rule))
				}
			}
		}
	}
	switch o := obj.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		for _, k := range slices.Sorted(mapKeys(o)) {
			if sub, ok := props[k].(map[string]any); ok {
				walkCEL(sub, o[k], at+"."+k, errs)
			} else if extra != nil {
				walkCEL(extra, o[k], at+"."+k, errs)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, v := range o {
				walkCEL(items, v, fmt.Sprintf("%s[%d]", at, i), errs)
			}
		}
	}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestVendoredCRDs: every operator kind the chart renders has its CRD vendored, and the
// strict schema actually rejects what the API server would.
func TestVendoredCRDs(t *testing.T) {
	t.Parallel()
	crds, err := loadCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for k := range customKinds {
		if _, ok := crds[k]; !ok {
			t.Errorf("no vendored CRD for %s", k)
		}
	}
	for _, tc := range []struct {
		name, doc, wantErr string
	}{
		{"unknown field", `{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: x}, spec: {scaleTargetRef: {name: d}, triggers: [{type: cpu, metadata: {}}], minReplicas: 1}}`, "minReplicas"},
		{"missing required", `{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: x}, spec: {triggers: [{type: cpu, metadata: {}}]}}`, "scaleTargetRef"},
		{"wrong type", `{apiVersion: postgresql.cnpg.io/v1, kind: Cluster, metadata: {name: x}, spec: {instances: "3"}}`, "instances"},
		{"enum", `{apiVersion: postgresql.cnpg.io/v1, kind: Pooler, metadata: {name: x}, spec: {cluster: {name: c}, pgbouncer: {poolMode: statement}}}`, "poolMode"},
		{"CEL rule", `{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: x}, spec: {scaleTargetRef: {name: d}, triggers: [{type: cpu, metadata: {}}], minReplicaCount: 5, maxReplicaCount: 2}}`, "minReplicaCount 5 > maxReplicaCount 2"},
		{"backup method", `{apiVersion: postgresql.cnpg.io/v1, kind: ScheduledBackup, metadata: {name: x}, spec: {cluster: {name: c}, schedule: "0 0 0 * * *", method: barmanCloud}}`, "method"},
		{"backup without schedule", `{apiVersion: postgresql.cnpg.io/v1, kind: ScheduledBackup, metadata: {name: x}, spec: {cluster: {name: c}, method: plugin}}`, "schedule"},
		{"retention pattern", `{apiVersion: barmancloud.cnpg.io/v1, kind: ObjectStore, metadata: {name: x}, spec: {retentionPolicy: 30days, configuration: {destinationPath: "s3://b/p"}}}`, "retentionPolicy"},
		{"object store CEL rule", `{apiVersion: barmancloud.cnpg.io/v1, kind: ObjectStore, metadata: {name: x}, spec: {configuration: {destinationPath: "s3://b/p", serverName: c}}}`, "serverName must not be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var head metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(tc.doc), &head); err != nil {
				t.Fatal(err)
			}
			o, err := decodeCustom([]byte(tc.doc), head)
			if err != nil {
				t.Fatal(err)
			}
			if err := validateCustom(o); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("validate = %v, want an error naming %q", err, tc.wantErr)
			}
		})
	}
}
