package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildOptions of Build.
type BuildOptions struct {
	// Output is the path of the binary; required.
	Output string
	// LDFlags are passed to go build -ldflags (e.g. "-X main.version=v1").
	LDFlags string
}

// Build compiles ./cmd/switchboard of the module around the working
// directory, so it works from the module root and from a package's tests.
func Build(ctx context.Context, opts BuildOptions) error {
	if opts.Output == "" {
		return errors.New("build switchboard: no output path")
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	args := []string{"build", "-o", opts.Output}
	if opts.LDFlags != "" {
		args = append(args, "-ldflags", opts.LDFlags)
	}
	cmd := exec.CommandContext(ctx, goTool(), append(args, "./cmd/switchboard")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/switchboard: %w\n%s", err, b)
	}
	return nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("build switchboard: run from inside the switchboard module")
	}
	return filepath.Dir(mod), nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}
