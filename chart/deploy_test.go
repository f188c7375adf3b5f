package chart_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// flyConfig is the part of flyctl's fly.toml schema that Switchboard uses; decoding is
// strict, so a misspelled key fails the test instead of being ignored by the test.
type flyConfig struct {
	App           string `toml:"app"`
	PrimaryRegion string `toml:"primary_region"`
	KillSignal    string `toml:"kill_signal"`
	KillTimeout   any    `toml:"kill_timeout"` // seconds, or a duration string
	Build         struct {
		Dockerfile string `toml:"dockerfile"`
	} `toml:"build"`
	Deploy struct {
		ReleaseCommand        string `toml:"release_command"`
		ReleaseCommandTimeout string `toml:"release_command_timeout"`
		Strategy              string `toml:"strategy"`
	} `toml:"deploy"`
	Env         map[string]string `toml:"env"`
	Processes   map[string]string `toml:"processes"`
	HTTPService *struct {
		InternalPort       int      `toml:"internal_port"`
		ForceHTTPS         bool     `toml:"force_https"`
		Processes          []string `toml:"processes"`
		AutoStopMachines   string   `toml:"auto_stop_machines"`
		AutoStartMachines  bool     `toml:"auto_start_machines"`
		MinMachinesRunning int      `toml:"min_machines_running"`
		Concurrency        struct {
			Type      string `toml:"type"`
			SoftLimit int    `toml:"soft_limit"`
			HardLimit int    `toml:"hard_limit"`
		} `toml:"concurrency"`
		Checks []flyCheck `toml:"checks"`
	} `toml:"http_service"`
	Checks  map[string]flyCheck `toml:"checks"`
	Metrics struct {
		Port int    `toml:"port"`
		Path string `toml:"path"`
	} `toml:"metrics"`
	VM []flyVM `toml:"vm"`
}

type flyVM struct {
	Processes []string `toml:"processes"`
	Size      string   `toml:"size"`
	Memory    string   `toml:"memory"`
}

type flyCheck struct {
	Type        string   `toml:"type"`
	Port        int      `toml:"port"`
	Method      string   `toml:"method"`
	Path        string   `toml:"path"`
	Interval    string   `toml:"interval"`
	Timeout     string   `toml:"timeout"`
	GracePeriod string   `toml:"grace_period"`
	Processes   []string `toml:"processes"`
}

var loadFly = sync.OnceValues(func() (flyConfig, error) {
	var cfg flyConfig
	b, err := os.ReadFile("../fly.toml")
	if err != nil {
		return cfg, err
	}
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("fly.toml: %w", err)
	}
	return cfg, nil
})

func TestFlyToml(t *testing.T) {
	t.Parallel()
	cfg, err := loadFly()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("process groups", func(t *testing.T) {
		t.Parallel()
		want := map[string]string{"web": "serve", "worker": "serve"}
		if len(cfg.Processes) != len(want) || cfg.Processes["web"] != want["web"] || cfg.Processes["worker"] != want["worker"] {
			t.Errorf("processes = %v, want %v", cfg.Processes, want)
		}
		// Roles come from FLY_PROCESS_GROUP: an app-wide SWITCHBOARD_ROLES would give both
		// groups the same roles.
		if v, ok := cfg.Env["SWITCHBOARD_ROLES"]; ok {
			t.Errorf("[env] sets SWITCHBOARD_ROLES=%q for every group", v)
		}
		for _, group := range []string{"web", "worker"} {
			if !slices.ContainsFunc(cfg.VM, func(vm flyVM) bool { return slices.Contains(vm.Processes, group) }) {
				t.Errorf("no [[vm]] for process group %s", group)
			}
		}
	})
	t.Run("web http service", func(t *testing.T) {
		t.Parallel()
		hs := cfg.HTTPService
		if hs == nil {
			t.Fatal("no [http_service]")
		}
		if !slices.Equal(hs.Processes, []string{"web"}) {
			t.Errorf("http_service.processes = %v, want [web] only", hs.Processes)
		}
		if hs.InternalPort != containerPort || cfg.Env["SWITCHBOARD_HTTP_ADDR"] != ":8080" {
			t.Errorf("internal_port %d, SWITCHBOARD_HTTP_ADDR %q, want %d and :8080", hs.InternalPort, cfg.Env["SWITCHBOARD_HTTP_ADDR"], containerPort)
		}
		if c := hs.Concurrency; c.Type != "connections" || c.SoftLimit <= 0 || c.HardLimit < c.SoftLimit {
			t.Errorf("concurrency = %+v, want type connections (WebSockets) with soft <= hard", c)
		}
		if hs.AutoStopMachines != "off" {
			t.Errorf("auto_stop_machines = %q: stopping Machines cuts WebSockets", hs.AutoStopMachines)
		}
		if len(hs.Checks) != 1 || hs.Checks[0].Path != readyPath || !strings.EqualFold(hs.Checks[0].Method, "GET") {
			t.Errorf("http_service.checks = %+v, want GET %s", hs.Checks, readyPath)
		}
	})
	t.Run("worker check", func(t *testing.T) {
		t.Parallel()
		var found bool
		for name, c := range cfg.Checks {
			if !slices.Equal(c.Processes, []string{"worker"}) {
				continue
			}
			found = true
			if c.Type != "http" || c.Port != containerPort || c.Path != readyPath {
				t.Errorf("check %s = %+v, want http on %d %s", name, c, containerPort, readyPath)
			}
		}
		if !found {
			t.Errorf("no [checks.*] for the worker group: %v", cfg.Checks)
		}
	})
	t.Run("release command runs migrate", func(t *testing.T) {
		t.Parallel()
		// Fly runs release_command as the image's CMD, after its ENTRYPOINT.
		argv := append(dockerfile(t).exec("ENTRYPOINT"), strings.Fields(cfg.Deploy.ReleaseCommand)...)
		if !slices.Equal(argv, []string{"switchboard", "migrate"}) {
			t.Errorf("release command runs %q, want [switchboard migrate]", argv)
		}
		for group, cmd := range cfg.Processes {
			argv := append(dockerfile(t).exec("ENTRYPOINT"), strings.Fields(cmd)...)
			if !slices.Equal(argv, []string{"switchboard", "serve"}) {
				t.Errorf("group %s runs %q, want [switchboard serve]", group, argv)
			}
		}
	})
	t.Run("kill timeout outlasts the drain", func(t *testing.T) {
		t.Parallel()
		if cfg.KillSignal != "SIGTERM" {
			t.Errorf("kill_signal = %q, want SIGTERM (starts the drain)", cfg.KillSignal)
		}
		kill := flyDuration(t, cfg.KillTimeout)
		drain, err := time.ParseDuration(cfg.Env["SWITCHBOARD_SHUTDOWN_TIMEOUT"])
		if err != nil {
			t.Fatalf("SWITCHBOARD_SHUTDOWN_TIMEOUT: %v", err)
		}
		if kill <= drain {
			t.Errorf("kill_timeout %s <= SWITCHBOARD_SHUTDOWN_TIMEOUT %s: Fly would SIGKILL mid-drain", kill, drain)
		}
		if kill > 300*time.Second {
			t.Errorf("kill_timeout %s is over Fly's 5 minute maximum", kill)
		}
	})
	t.Run("client IP from the Fly proxy", func(t *testing.T) {
		t.Parallel()
		if h := cfg.Env["SWITCHBOARD_CLIENT_IP_HEADER"]; h != "Fly-Client-IP" {
			t.Errorf("SWITCHBOARD_CLIENT_IP_HEADER = %q, want Fly-Client-IP", h)
		}
		proxies := strings.Split(cfg.Env["SWITCHBOARD_TRUSTED_PROXIES"], ",")
		for _, p := range proxies {
			if _, _, err := net.ParseCIDR(strings.TrimSpace(p)); err != nil {
				t.Errorf("SWITCHBOARD_TRUSTED_PROXIES: %v", err)
			}
		}
		if !slices.Contains(proxies, "172.16.0.0/12") {
			t.Errorf("SWITCHBOARD_TRUSTED_PROXIES = %v, want the Fly proxy's 172.16.0.0/12", proxies)
		}
	})
	t.Run("advertise address from FLY_PRIVATE_IP", func(t *testing.T) {
		t.Parallel()
		if v, ok := cfg.Env["SWITCHBOARD_ADVERTISE_ADDR"]; ok {
			t.Errorf("SWITCHBOARD_ADVERTISE_ADDR=%q would be the same for every Machine; leave it unset", v)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		t.Parallel()
		if cfg.Metrics.Port != containerPort || cfg.Metrics.Path != metricsPath {
			t.Errorf("metrics = %+v", cfg.Metrics)
		}
	})
	t.Run("drain matches the chart", func(t *testing.T) {
		t.Parallel()
		r := render(t, withDB)
		c := container(t, get[*appsv1.Deployment](t, r, fullname+"-web").Spec.Template.Spec, "switchboard")
		if e := findEnv(c, "SWITCHBOARD_SHUTDOWN_TIMEOUT"); e == nil || e.Value != cfg.Env["SWITCHBOARD_SHUTDOWN_TIMEOUT"] {
			t.Errorf("chart drains for %s, fly.toml for %q", yamlOf(e), cfg.Env["SWITCHBOARD_SHUTDOWN_TIMEOUT"])
		}
	})
}

func flyDuration(t *testing.T, v any) time.Duration {
	t.Helper()
	switch v := v.(type) {
	case int64:
		return time.Duration(v) * time.Second
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("kill_timeout %q: %v", v, err)
		}
		return d
	}
	t.Fatalf("kill_timeout = %#v, want seconds or a duration", v)
	return 0
}

// dockerInstruction is one Dockerfile instruction with continuations joined.
type dockerInstruction struct {
	cmd, args string
	stage     int // index of the FROM it belongs to
}

type dockerfileInfo []dockerInstruction

var loadDockerfile = sync.OnceValues(func() (dockerfileInfo, error) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		return nil, err
	}
	var (
		out     dockerfileInfo
		pending string
		stage   = -1
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && pending == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		line, pending = pending+line, ""
		cmd, args, _ := strings.Cut(line, " ")
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, dockerInstruction{cmd: cmd, args: strings.TrimSpace(args), stage: stage})
	}
	return out, sc.Err()
})

func dockerfile(t *testing.T) dockerfileInfo {
	t.Helper()
	d, err := loadDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// all returns the arguments of every instruction cmd in the given stage (-1: any).
func (d dockerfileInfo) all(cmd string, stage int) []string {
	var out []string
	for _, in := range d {
		if in.cmd == cmd && (stage < 0 || in.stage == stage) {
			out = append(out, in.args)
		}
	}
	return out
}

func (d dockerfileInfo) finalStage() int { return d[len(d)-1].stage }

// exec returns the exec-form (JSON) arguments of the last cmd instruction.
func (d dockerfileInfo) exec(cmd string) []string {
	all := d.all(cmd, d.finalStage())
	if len(all) == 0 {
		return nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(all[len(all)-1]), &argv); err != nil {
		return []string{"<shell form: " + all[len(all)-1] + ">"}
	}
	return argv
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	d := dockerfile(t)
	final := d.finalStage()

	t.Run("static build with version stamp", func(t *testing.T) {
		t.Parallel()
		var build *dockerInstruction
		for i, in := range d {
			if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
				build = &d[i]
			}
		}
		if build == nil {
			t.Fatal("no RUN go build")
		}
		stageText := strings.Join(append(d.all("ENV", build.stage), build.args), " ")
		if !strings.Contains(stageText, "CGO_ENABLED=0") {
			t.Error("CGO_ENABLED=0 not set for go build: the binary would not be static")
		}
		if !strings.Contains(build.args, "./cmd/switchboard") {
			t.Errorf("go build does not build ./cmd/switchboard: %s", build.args)
		}
		if !regexp.MustCompile(`-X main\.version=\$\{?VERSION\}?`).MatchString(build.args) {
			t.Errorf("go build does not stamp main.version from $VERSION: %s", build.args)
		}
		if !slices.ContainsFunc(d.all("ARG", build.stage), func(a string) bool { return strings.HasPrefix(a, "VERSION") }) {
			t.Error("no ARG VERSION in the build stage")
		}
		if !regexp.MustCompile(`-X main\.revision=\$\{?REVISION\}?`).MatchString(build.args) ||
			!slices.ContainsFunc(d.all("ARG", build.stage), func(a string) bool { return strings.HasPrefix(a, "REVISION") }) {
			t.Errorf("go build does not stamp main.revision from ARG REVISION (switchboard_build_info): %s", build.args)
		}
	})
	t.Run("distroless non-root runtime", func(t *testing.T) {
		t.Parallel()
		from := d.all("FROM", final)[0]
		if !strings.HasPrefix(from, "gcr.io/distroless/static") && from != "scratch" {
			t.Errorf("runtime image %q, want distroless/static or scratch", from)
		}
		users := d.all("USER", final)
		if len(users) == 0 {
			t.Fatal("no USER in the runtime stage")
		}
		uid, _, _ := strings.Cut(users[len(users)-1], ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("USER %q, want a numeric non-root uid (runAsNonRoot needs one)", users[len(users)-1])
		}
		web := get[*appsv1.Deployment](t, render(t, withDB), fullname+"-web")
		if sc := web.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || strconv.FormatInt(*sc.RunAsUser, 10) != uid {
			t.Errorf("chart runAsUser %s, image USER %s", yamlOf(sc), uid)
		}
	})
	t.Run("entrypoint and port", func(t *testing.T) {
		t.Parallel()
		if got := d.exec("ENTRYPOINT"); !slices.Equal(got, []string{"switchboard"}) {
			t.Errorf("ENTRYPOINT %q, want [switchboard]", got)
		}
		if got := d.exec("CMD"); !slices.Equal(got, []string{"serve"}) {
			t.Errorf("CMD %q, want [serve]", got)
		}
		if got := d.all("EXPOSE", final); !slices.Equal(got, []string{"8080"}) {
			t.Errorf("EXPOSE %q, want 8080", got)
		}
	})
	t.Run("go version follows go.mod", func(t *testing.T) {
		t.Parallel()
		mod, err := os.ReadFile("../go.mod")
		if err != nil {
			t.Skipf("root go.mod: %v", err)
		}
		m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
		if m == nil {
			t.Fatal("no go directive in ../go.mod")
		}
		want := "GO_VERSION=" + string(m[1])
		if args := d.all("ARG", -1); !slices.ContainsFunc(args, func(a string) bool {
			return a == want || strings.HasPrefix(a, want+".")
		}) {
			t.Errorf("ARGs %q, want %s (go.mod says go %s)", args, want, m[1])
		}
	})
	t.Run("dockerignore keeps the sources", func(t *testing.T) {
		t.Parallel()
		b, err := os.ReadFile("../.dockerignore")
		if err != nil {
			t.Fatal(err)
		}
		var patterns []string
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				patterns = append(patterns, l)
			}
		}
		for _, p := range patterns {
			if slices.Contains([]string{"go.mod", "go.sum", "cmd", "*.go", "**/*.go", "migrations", "web", "infra"}, p) {
				t.Errorf(".dockerignore drops %q, which the build needs", p)
			}
		}
		if !slices.Contains(patterns, ".git") {
			t.Error(".dockerignore keeps .git in the build context")
		}
	})
}

// TestEnvNamesAreTheBinarys checks every variable the chart and fly.toml set against the
// envconfig tags of the service's config struct, so a renamed variable fails here rather
// than being silently ignored in production.
func TestEnvNamesAreTheBinarys(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../infra/config/config.go")
	if err != nil {
		t.Skipf("service config: %v", err)
	}
	// Helpers other variables expand: $(POD_IP) (downward API), $(CNPG_APP_PASSWORD) (cnpg).
	known := map[string]bool{"POD_IP": true, "CNPG_APP_PASSWORD": true}
	for _, m := range regexp.MustCompile(`envconfig:"([A-Z0-9_]+)"`).FindAllSubmatch(src, -1) {
		known[string(m[1])] = true
	}
	if len(known) < 10 {
		t.Fatalf("found only %d envconfig tags in infra/config/config.go", len(known))
	}
	t.Run("chart", func(t *testing.T) {
		t.Parallel()
		for _, sc := range scenarios {
			r := render(t, sc.values...)
			pods := map[string]corev1.PodSpec{}
			for _, d := range all[*appsv1.Deployment](r) {
				pods[d.Name] = d.Spec.Template.Spec
			}
			for _, j := range all[*batchv1.Job](r) {
				pods[j.Name] = j.Spec.Template.Spec
			}
			for name, spec := range pods {
				for _, c := range spec.Containers {
					for _, e := range c.Env {
						if !known[e.Name] && e.Name != "GOMEMLIMIT" { // GOMEMLIMIT: extraEnv in the scenario
							t.Errorf("%s: %s sets %s, which the binary does not read", sc.name, name, e.Name)
						}
					}
				}
			}
		}
	})
	t.Run("fly.toml", func(t *testing.T) {
		t.Parallel()
		cfg, err := loadFly()
		if err != nil {
			t.Fatal(err)
		}
		for name := range cfg.Env {
			if !known[name] {
				t.Errorf("fly.toml sets %s, which the binary does not read", name)
			}
		}
	})
}
