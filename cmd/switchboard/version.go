package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/switchboard/switchboard/infra/metrics"
)

// versionCommand prints the build's version; with -v also its revision,
// Go version and platform, one "key value" line each, as
// switchboard_build_info labels them.
func versionCommand(args []string, w io.Writer) error {
	switch {
	case len(args) == 0:
		_, err := fmt.Fprintln(w, version)
		return err
	case len(args) == 1 && (args[0] == "-v" || args[0] == "--verbose"):
		_, err := fmt.Fprintf(w, "version %s\nrevision %s\ngo %s\nplatform %s/%s\n",
			version, metrics.Revision(revision), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	}
	return fmt.Errorf("unexpected arguments %q (usage: switchboard version [-v])", args)
}
