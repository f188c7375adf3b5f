package web

import (
	"encoding/json"

	"github.com/danielgtaylor/huma/v2"
)

// nullableString is a PATCH field where absent, null and a value differ:
// absent keeps the field, null clears it.
type nullableString struct {
	Set   bool    // the field was in the body
	Value *string // nil: null
}

func (n *nullableString) UnmarshalJSON(b []byte) error {
	n.Set = true
	return json.Unmarshal(b, &n.Value)
}

// Schema is a string of at most 200 characters, or null.
func (nullableString) Schema(huma.Registry) *huma.Schema {
	maxLen := 200
	return &huma.Schema{Type: huma.TypeString, Nullable: true, MaxLength: &maxLen}
}

// patch is the value for a doubly optional patch field: nil when absent.
func (n nullableString) patch() **string {
	if !n.Set {
		return nil
	}
	return &n.Value
}

// nullableInt is nullableString for max_concurrency (1–100 or null).
type nullableInt struct {
	Set   bool
	Value *int
}

func (n *nullableInt) UnmarshalJSON(b []byte) error {
	n.Set = true
	return json.Unmarshal(b, &n.Value)
}

// Schema is an integer from 1 to 100, or null.
func (nullableInt) Schema(huma.Registry) *huma.Schema {
	lo, hi := 1.0, 100.0
	return &huma.Schema{Type: huma.TypeInteger, Nullable: true, Minimum: &lo, Maximum: &hi}
}

func (n nullableInt) patch() **int {
	if !n.Set {
		return nil
	}
	return &n.Value
}
