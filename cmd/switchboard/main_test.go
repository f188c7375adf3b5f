package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/browsertest"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) {
	dbtest.Main(m, migrations.Hash(), migrations.Migrate, browsertest.Close)
}

// testConfig is a valid configuration for a replica on dbURL listening on a
// free loopback port. Replicas built from it share their secrets.
func testConfig(t testing.TB, dbURL string) config.Config {
	t.Helper()
	cfg := config.Config{
		DatabaseURL: dbURL, HTTPAddr: "127.0.0.1:0",
		Roles:     []string{config.RoleWeb, config.RoleWorker},
		JWTSecret: "test-jwt-secret-0123456789", ClusterSecret: "test-cluster-secret-0123456789",
		ClientIPHeader: "X-Forwarded-For", AuthRate: 1000, AuthBurst: 1000, UserRate: 1000, UserBurst: 1000,
		DataDir: t.TempDir(), LogLevel: "warn", ShutdownTimeout: 5 * time.Second, BcryptCost: 4,
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	return cfg
}

// testServer is one replica started through the real wiring on :0.
type testServer struct {
	*app
	URL string
}

// startServer builds and starts a replica and stops it when the test ends.
func startServer(t testing.TB, cfg config.Config) *testServer {
	t.Helper()
	ctx := context.Background()
	a, err := newApp(ctx, cfg, dbtest.Logger(t))
	if err != nil {
		t.Fatalf("new app: %v", err)
	}
	if err := a.Start(ctx); err != nil {
		a.Stop()
		t.Fatalf("start app: %v", err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(a.Stop) })
	return &testServer{app: a, URL: "http://" + a.Addr()}
}

// call sends a JSON request and decodes a JSON answer.
func call(t *testing.T, method, url string, body any, token string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// registerUser creates an account through srv and returns its token and id.
func registerUser(t *testing.T, srv *testServer, email string) (token, id string) {
	t.Helper()
	return registerUserAt(t, srv.URL, email)
}

// metric reads one sample of srv's /metrics; labels as written in the
// exposition format (`a="b",c="d"`), "" for none. Missing samples read 0.
func metric(t *testing.T, srv *testServer, name, labels string) float64 {
	t.Helper()
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	prefix := name + " "
	if labels != "" {
		prefix = name + "{" + labels + "} "
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
