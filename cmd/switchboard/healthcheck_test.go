package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestReadyURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  config.Config
		want string
	}{
		{config.Config{}, "http://127.0.0.1:8080/healthz/ready"},
		{config.Config{Port: "9000"}, "http://127.0.0.1:9000/healthz/ready"},
		{config.Config{HTTPAddr: "0.0.0.0:7000", Port: "9000"}, "http://127.0.0.1:7000/healthz/ready"},
		{config.Config{HTTPAddr: "[::]:7000"}, "http://127.0.0.1:7000/healthz/ready"},
		{config.Config{HTTPAddr: "10.1.2.3:8081"}, "http://10.1.2.3:8081/healthz/ready"},
	} {
		if got := readyURL(tc.cfg); got != tc.want {
			t.Errorf("readyURL(%+v) = %s, want %s", tc.cfg, got, tc.want)
		}
	}
}

// TestHealthcheck: the subcommand passes against a ready replica, fails
// against a draining one (readiness 503) and against a closed port.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	srv := startServer(t, testConfig(t, dbtest.NewDatabaseURL(t)))
	ctx := context.Background()
	var out bytes.Buffer
	if err := healthcheck(ctx, []string{srv.URL + "/healthz/ready"}, &out); err != nil || !strings.Contains(out.String(), `"ok"`) {
		t.Fatalf("ready replica: %v, %q", err, out.String())
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/healthz/ready"
	l.Close()
	if err := healthcheck(ctx, []string{closed}, &out); err == nil {
		t.Fatal("a closed port passed the health check")
	}

	srv.cluster.DrainLocal(ctx)
	err = healthcheck(ctx, []string{srv.URL + "/healthz/ready"}, &out)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("draining replica: %v, want a 503 failure", err)
	}
}
