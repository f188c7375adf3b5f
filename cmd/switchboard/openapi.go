package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/switchboard/switchboard/web"
)

// openapiCommand prints the OpenAPI document a web replica serves, as JSON
// or (with --yaml) YAML, without a database or configuration.
func openapiCommand(args []string, out io.Writer) error {
	spec := web.Spec(version)
	var (
		b   []byte
		err error
	)
	switch {
	case len(args) == 0:
		b, err = json.MarshalIndent(spec, "", "  ")
	case len(args) == 1 && args[0] == "--yaml":
		b, err = spec.YAML()
	default:
		return fmt.Errorf("unexpected arguments %q (only --yaml)", args)
	}
	if err != nil {
		return fmt.Errorf("encode the document: %w", err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}
