package chart_test

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

// goreleaserConfig is the part of .goreleaser.yaml these tests read; the whole file is
// checked against GoReleaser's own JSON schema (testdata/goreleaser).
type goreleaserConfig struct {
	Version     int    `json:"version"`
	ProjectName string `json:"project_name"`
	Builds      []struct {
		ID      string   `json:"id"`
		Main    string   `json:"main"`
		Binary  string   `json:"binary"`
		Env     []string `json:"env"`
		Flags   []string `json:"flags"`
		Ldflags []string `json:"ldflags"`
		Goos    []string `json:"goos"`
		Goarch  []string `json:"goarch"`
	} `json:"builds"`
	Archives []struct {
		Formats []string `json:"formats"`
		Files   []string `json:"files"`
	} `json:"archives"`
	Checksum struct {
		NameTemplate string `json:"name_template"`
		Algorithm    string `json:"algorithm"`
	} `json:"checksum"`
}

// releaseTargets are the platforms a release ships archives for.
var releaseTargets = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}

// Values the release test stamps into the binaries in place of GoReleaser's.
const (
	testReleaseVersion  = "1.2.3-citest"
	testReleaseRevision = "0123456789abcdef0123456789abcdef01234567"
)

var loadRelease = sync.OnceValues(func() (goreleaserConfig, error) {
	var c goreleaserConfig
	raw, err := os.ReadFile("../.goreleaser.yaml")
	if err != nil {
		return c, err
	}
	if err := validateGoreleaser(raw); err != nil {
		return c, err
	}
	return c, yaml.Unmarshal(raw, &c)
})

func validateGoreleaser(raw []byte) error {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	f, err := os.Open("testdata/goreleaser/schema.json")
	if err != nil {
		return err
	}
	defer f.Close()
	schema, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("goreleaser.json", schema); err != nil {
		return err
	}
	s, err := c.Compile("goreleaser.json")
	if err != nil {
		return err
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("does not match GoReleaser's schema: %w", err)
	}
	return nil
}

// renderLdflags renders the build's ldflags as GoReleaser would, with the test's
// version and commit; any other template field is an error.
func renderLdflags(c goreleaserConfig) (string, error) {
	tpl, err := template.New("ldflags").Option("missingkey=error").Parse(strings.Join(c.Builds[0].Ldflags, " "))
	if err != nil {
		return "", err
	}
	var out strings.Builder
	if err := tpl.Execute(&out, map[string]string{"Version": testReleaseVersion, "FullCommit": testReleaseRevision}); err != nil {
		return "", fmt.Errorf("ldflags use a template field beyond Version and FullCommit: %w", err)
	}
	return out.String(), nil
}

func TestGoreleaserConfig(t *testing.T) {
	t.Parallel()
	c, err := loadRelease()
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 2 || len(c.Builds) != 1 {
		t.Fatalf("version %d with %d builds, want GoReleaser v2 config with one build", c.Version, len(c.Builds))
	}
	b := c.Builds[0]
	if b.Main != "./cmd/switchboard" || b.Binary != "switchboard" {
		t.Errorf("build main %q binary %q", b.Main, b.Binary)
	}
	var targets []string
	for _, goos := range b.Goos {
		for _, goarch := range b.Goarch {
			targets = append(targets, goos+"/"+goarch)
		}
	}
	if slices.Sort(targets); !slices.Equal(targets, releaseTargets) {
		t.Errorf("targets %v, want %v", targets, releaseTargets)
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") || !slices.Contains(b.Flags, "-trimpath") {
		t.Errorf("env %v flags %v: want a static (CGO_ENABLED=0), -trimpath build like the Dockerfile's", b.Env, b.Flags)
	}
	ld, err := renderLdflags(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-s -w", "-X main.version=" + testReleaseVersion, "-X main.revision=" + testReleaseRevision} {
		if !strings.Contains(ld, want) {
			t.Errorf("ldflags %q lack %q", ld, want)
		}
	}
	docker, err := os.ReadFile("../Dockerfile")
	if err != nil || !bytes.Contains(docker, []byte(`-ldflags "-s -w -X main.version=`)) {
		t.Errorf("the Dockerfile no longer stamps main.version as the release does (%v)", err)
	}
	if len(c.Archives) != 1 || !slices.Equal(c.Archives[0].Formats, []string{"tar.gz"}) {
		t.Errorf("archives = %+v, want one tar.gz archive per target", c.Archives)
	}
	for _, f := range c.Archives[0].Files {
		if _, err := os.Stat(filepath.Join("..", f)); err != nil {
			t.Errorf("archive file %s: %v", f, err)
		}
	}
	if c.Checksum.Algorithm != "sha256" || c.Checksum.NameTemplate == "" {
		t.Errorf("checksum = %+v, want a sha256 checksums file", c.Checksum)
	}
}

// TestGoreleaserSchemaRejects: the vendored schema catches a misspelled key.
func TestGoreleaserSchemaRejects(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		"version: 2\nbuilds: [{goos: [linux], ldflag: [-s]}]\n",
		"version: 2\nchecksum: {algorithm: [sha256]}\n",
	} {
		if err := validateGoreleaser([]byte(doc)); err == nil {
			t.Errorf("accepted %q", doc)
		}
	}
}

// TestReleaseNativeBuild builds ./cmd/switchboard for this machine exactly as
// .goreleaser.yaml builds each target (env, flags, rendered ldflags), CI's substitute for
// a GoReleaser snapshot, and asks the binary what it is. Only the native target is
// built: TestGoreleaserConfig checks the four targets are configured, and cross-compiling
// them all costs minutes on two cores for what the native build already proves (the
// flags and ldflags; the code is pure Go, CGO_ENABLED=0).
func TestReleaseNativeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	target := runtime.GOOS + "/" + runtime.GOARCH
	if !slices.Contains(releaseTargets, target) {
		t.Skipf("%s is not a release target", target)
	}
	bin := releaseBinary(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOOS"] != runtime.GOOS || settings["GOARCH"] != runtime.GOARCH || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v, want %s, CGO_ENABLED=0, -trimpath", settings, target)
	}
	out, err := exec.Command(bin, "version", "-v").Output()
	if err != nil {
		t.Fatalf("switchboard version -v: %v", err)
	}
	want := fmt.Sprintf("version %s\nrevision %s\n", testReleaseVersion, testReleaseRevision)
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("switchboard version -v =\n%s\nwant it to begin\n%s", out, want)
	}
}

// releaseBinary returns the release's one build for this machine (built once per test
// binary, shared by the tests that run it), failing t if it does not build.
func releaseBinary(t *testing.T) string {
	t.Helper()
	bin, err := nativeRelease()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// nativeRelease builds ./cmd/switchboard with the release's env, flags and ldflags
// (rendered with the test's version and revision) for this machine.
var nativeRelease = sync.OnceValues(func() (string, error) {
	c, err := loadRelease()
	if err != nil {
		return "", err
	}
	ldflags, err := renderLdflags(c)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "switchboard-release-")
	if err != nil {
		return "", err
	}
	b := c.Builds[0]
	out := filepath.Join(dir, b.Binary)
	args := append([]string{"build", "-o", out}, b.Flags...)
	args = append(args, "-ldflags", ldflags, b.Main)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), b.Env...)
	cmd.Env = append(cmd.Env, "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return out, nil
})
