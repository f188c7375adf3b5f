package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/switchboard/switchboard/infra/config"
)

// healthcheckTimeout bounds one `switchboard healthcheck`: the readiness
// route itself answers within about 2 s.
const healthcheckTimeout = 4 * time.Second

// healthcheck asks a replica's readiness route, by default this host's own
// (SWITCHBOARD_HTTP_ADDR or PORT, as serve listens), and fails unless it
// answers 200. It is the container health check of an image without a
// shell or curl (compose.yaml).
func healthcheck(ctx context.Context, args []string, stdout io.Writer) error {
	url := readyURL(config.Config{HTTPAddr: os.Getenv("SWITCHBOARD_HTTP_ADDR"), Port: os.Getenv("PORT")})
	if len(args) > 0 {
		url = args[0]
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", url, res.StatusCode, body)
	}
	_, err = fmt.Fprintf(stdout, "%s: %s\n", url, body)
	return err
}

// readyURL is the readiness route of the replica listening per cfg, reached
// over loopback when it listens on every address.
func readyURL(cfg config.Config) string {
	host, port, err := net.SplitHostPort(cfg.ListenAddr())
	if err != nil {
		host, port = "", "8080"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz/ready"
}
