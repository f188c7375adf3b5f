package chart_test

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

// composeFile is the subset of the Compose specification that compose.yaml relies on;
// the whole file is checked against the specification's JSON schema first.
type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image     string   `json:"image"`
	Profiles  []string `json:"profiles"`
	DependsOn map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Environment     map[string]string `json:"environment"`
	Ports           []string          `json:"ports"`
	Volumes         []string          `json:"volumes"`
	StopGracePeriod string            `json:"stop_grace_period"`
	Healthcheck     struct {
		Test        []string `json:"test"`
		Interval    string   `json:"interval"`
		Timeout     string   `json:"timeout"`
		Retries     int      `json:"retries"`
		StartPeriod string   `json:"start_period"`
	} `json:"healthcheck"`
}

// loadCompose validates ../compose.yaml (anchors and merge keys resolved, as Compose
// does) against the vendored Compose specification schema and decodes it.
func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := composeSchema(t).Validate(mustJSON(t, doc)); err != nil {
		t.Fatalf("compose.yaml does not match the Compose specification: %v", err)
	}
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// composeSchema compiles testdata/compose/compose-spec.json.
func composeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/compose/compose-spec.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("compose-spec.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("compose-spec.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustJSON(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestComposeSchemaRejects: the vendored schema and the loader catch what Compose would.
func TestComposeSchemaRejects(t *testing.T) {
	t.Parallel()
	s := composeSchema(t)
	for name, doc := range map[string]string{
		"unknown service key": `{services: {a: {image: x, restart_policy: always}}}`,
		"bad condition":       `{services: {a: {image: x, depends_on: {b: {condition: service_ready}}}, b: {image: y}}}`,
		"ports as a map":      `{services: {a: {image: x, ports: {web: 8080}}}}`,
		"unknown top-level":   `{services: {a: {image: x}}, volume: {pgdata: {}}}`,
	} {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(mustJSON(t, j)); err == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
}

// requiredVar matches a Compose interpolation that fails when the variable is unset or
// empty: ${NAME:?message}.
var requiredVar = regexp.MustCompile(`^\$\{([A-Z_]+):\?[^}]+\}$`)

func TestCompose(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	pg, app, worker := f.Services["postgres"], f.Services["switchboard"], f.Services["worker"]
	if pg.Image == "" || app.Image == "" || worker.Image != app.Image {
		t.Fatalf("services postgres, switchboard and worker (same image) expected; have %v", slices.Sorted(maps.Keys(f.Services)))
	}

	t.Run("postgres is health-checked with pg_isready on its database", func(t *testing.T) {
		hc := pg.Healthcheck.Test
		want := []string{"CMD", "pg_isready", "--username=" + pg.Environment["POSTGRES_USER"], "--dbname=" + pg.Environment["POSTGRES_DB"]}
		if !slices.Equal(hc, want) {
			t.Errorf("postgres healthcheck = %q, want %q", hc, want)
		}
		if pg.Healthcheck.Retries < 3 || pg.Healthcheck.Interval == "" {
			t.Errorf("postgres healthcheck timings: %+v", pg.Healthcheck)
		}
	})
	t.Run("its data is on a named volume", func(t *testing.T) {
		if _, ok := f.Volumes["pgdata"]; !ok || !slices.Contains(pg.Volumes, "pgdata:/var/lib/postgresql/data") {
			t.Errorf("volumes %v, postgres mounts %v: want the named volume pgdata at /var/lib/postgresql/data", f.Volumes, pg.Volumes)
		}
		if !strings.HasPrefix(pg.Image, "postgres:17") {
			t.Errorf("postgres image %q: the data path above is that of postgres:17 and older (18 moved it)", pg.Image)
		}
	})
	for name, s := range map[string]composeService{"switchboard": app, "worker": worker} {
		t.Run(name+" starts once postgres is healthy", func(t *testing.T) {
			if d, ok := s.DependsOn["postgres"]; !ok || d.Condition != "service_healthy" {
				t.Errorf("depends_on = %+v, want postgres: service_healthy", s.DependsOn)
			}
		})
		t.Run(name+" is healthy while /healthz/ready answers", func(t *testing.T) {
			if want := []string{"CMD", "switchboard", "healthcheck"}; !slices.Equal(s.Healthcheck.Test, want) {
				t.Errorf("healthcheck = %q, want %q (TestHealthcheckCommand runs it)", s.Healthcheck.Test, want)
			}
			grace, err := time.ParseDuration(s.StopGracePeriod)
			if err != nil || grace <= 25*time.Second {
				t.Errorf("stop_grace_period %q must exceed the 25s drain", s.StopGracePeriod)
			}
		})
		t.Run(name+" has the database URL and the secrets serve requires", func(t *testing.T) {
			checkComposeEnv(t, s.Environment, pg.Environment)
		})
	}
	t.Run("roles", func(t *testing.T) {
		if r, ok := app.Environment["SWITCHBOARD_ROLES"]; ok {
			t.Errorf("switchboard sets SWITCHBOARD_ROLES=%s; it runs both (the default)", r)
		}
		if worker.Environment["SWITCHBOARD_ROLES"] != "worker" || len(worker.Ports) != 0 || !slices.Equal(worker.Profiles, []string{"workers"}) {
			t.Errorf("worker: roles %q, ports %v, profiles %v; want worker only, no published port, profile workers",
				worker.Environment["SWITCHBOARD_ROLES"], worker.Ports, worker.Profiles)
		}
		if len(app.Ports) != 1 || !strings.HasSuffix(app.Ports[0], ":8080") {
			t.Errorf("switchboard ports = %v, want one published port to the container's 8080", app.Ports)
		}
	})
}

// checkComposeEnv: DATABASE_URL reaches the postgres service as its user and database,
// and every secret is interpolated from a variable that must be set.
func checkComposeEnv(t *testing.T, env, pg map[string]string) {
	t.Helper()
	for _, k := range []string{"SWITCHBOARD_JWT_SECRET", "SWITCHBOARD_CLUSTER_SECRET"} {
		if m := requiredVar.FindStringSubmatch(env[k]); m == nil || m[1] != k {
			t.Errorf("%s = %q, want ${%s:?message}: serve refuses to start without it", k, env[k], k)
		}
	}
	password := requiredVar.FindStringSubmatch(pg["POSTGRES_PASSWORD"])
	if password == nil {
		t.Fatalf("POSTGRES_PASSWORD = %q, want a required variable", pg["POSTGRES_PASSWORD"])
	}
	raw := regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllStringFunc(env["DATABASE_URL"], func(v string) string {
		if m := requiredVar.FindStringSubmatch(v); m != nil && m[1] == password[1] {
			return "PASSWORD"
		}
		return v
	})
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("DATABASE_URL %q: %v", env["DATABASE_URL"], err)
	}
	pw, _ := u.User.Password()
	if u.Scheme != "postgres" || u.Hostname() != "postgres" || u.Port() != "5432" || u.User.Username() != pg["POSTGRES_USER"] ||
		pw != "PASSWORD" || u.Path != "/"+pg["POSTGRES_DB"] {
		t.Errorf("DATABASE_URL %q does not reach service postgres as %s/%s with ${%s}", env["DATABASE_URL"], pg["POSTGRES_USER"], pg["POSTGRES_DB"], password[1])
	}
}

// TestHealthcheckCommand runs the health check compose.yaml gives the switchboard
// services, `switchboard healthcheck`, built as released: it passes while the replica's
// readiness route answers 200 and fails while it answers 503.
func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	bin := releaseBinary(t)
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != readyPath:
			http.NotFound(w, r)
		case ready.Load():
			fmt.Fprint(w, `{"status":"ok"}`)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	check := func() error {
		cmd := exec.Command(bin, "healthcheck")
		cmd.Env = append(os.Environ(), "SWITCHBOARD_HTTP_ADDR=", fmt.Sprintf("PORT=%d", port))
		return cmd.Run()
	}
	if err := check(); err == nil {
		t.Error("passed while readiness answers 503")
	}
	ready.Store(true)
	if err := check(); err != nil {
		t.Errorf("failed while readiness answers 200: %v", err)
	}
}
