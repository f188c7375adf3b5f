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

// releaseLdflags renders the build's ldflags as GoReleaser would, with the test's
// version and commit; any other template field fails.
func releaseLdflags(t *testing.T, c goreleaserConfig) string {
	t.Helper()
	tpl, err := template.New("ldflags").Option("missingkey=error").Parse(strings.Join(c.Builds[0].Ldflags, " "))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tpl.Execute(&out, map[string]string{"Version": testReleaseVersion, "FullCommit": testReleaseRevision}); err != nil {
		t.Fatalf("ldflags use a template field beyond Version and FullCommit: %v", err)
	}
	return out.String()
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
	ld := releaseLdflags(t, c)
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

// releaseBuild cross-compiles ./cmd/switchboard for one target exactly as
// .goreleaser.yaml builds it (env, flags, rendered ldflags) and returns the binary's path.
var releaseBuild = sync.OnceValue(func() func(t *testing.T, target string) string {
	var mu sync.Mutex
	built := map[string]string{}
	dir, err := os.MkdirTemp("", "switchboard-release-")
	if err != nil {
		panic(err)
	}
	return func(t *testing.T, target string) string {
		t.Helper()
		mu.Lock() // one go build at a time: they share the cache and two cores
		defer mu.Unlock()
		if p, ok := built[target]; ok {
			return p
		}
		c, err := loadRelease()
		if err != nil {
			t.Fatal(err)
		}
		b := c.Builds[0]
		goos, goarch, _ := strings.Cut(target, "/")
		out := filepath.Join(dir, goos+"_"+goarch, b.Binary)
		args := append([]string{"build", "-o", out}, b.Flags...)
		args = append(args, "-ldflags", releaseLdflags(t, c), b.Main)
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), b.Env...)
		cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH="+goarch, "GOWORK=off")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s for %s: %v\n%s", strings.Join(args, " "), target, err, msg)
		}
		built[target] = out
		return out
	}
})

// TestReleaseTargetsBuild cross-compiles the four release targets with the release's
// flags (CI's substitute for running GoReleaser, whose own build takes too long) and
// reads back what each binary says about its build.
func TestReleaseTargetsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles four binaries")
	}
	t.Parallel()
	for _, target := range releaseTargets {
		t.Run(strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			t.Parallel()
			bin := releaseBuild()(t, target)
			info, err := buildinfo.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			settings := map[string]string{}
			for _, s := range info.Settings {
				settings[s.Key] = s.Value
			}
			goos, goarch, _ := strings.Cut(target, "/")
			if settings["GOOS"] != goos || settings["GOARCH"] != goarch || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
				t.Errorf("build settings %v, want %s, CGO_ENABLED=0, -trimpath", settings, target)
			}
			// With -trimpath the go command leaves -ldflags out of the build info: look for
			// the stamped strings themselves.
			raw, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			for _, stamp := range []string{testReleaseVersion, testReleaseRevision} {
				if !bytes.Contains(raw, []byte(stamp)) {
					t.Errorf("%s is not stamped into the binary", stamp)
				}
			}
			if target != runtime.GOOS+"/"+runtime.GOARCH {
				return
			}
			out, err := exec.Command(bin, "version").Output()
			if err != nil || strings.TrimSpace(string(out)) != testReleaseVersion {
				t.Errorf("switchboard version = %q, %v; want %s", out, err, testReleaseVersion)
			}
		})
	}
}
