package dbtest

import (
	"testing"

	"github.com/switchboard/switchboard/infra/testkit/cutproxy"
)

// CutProxy is a cutproxy.Proxy in front of a test database that a test can
// cut and restore: the outage a failover or a restart is to a client,
// without touching the server other tests share.
type CutProxy struct{ *cutproxy.Proxy }

// NewCutProxy proxies to the host and port of dbURL until the test ends.
func NewCutProxy(t testing.TB, dbURL string) *CutProxy {
	t.Helper()
	p, err := cutproxy.Start(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &CutProxy{p}
}

// URL is dbURL pointed at the proxy.
func (p *CutProxy) URL(dbURL string) string {
	u, err := p.Proxy.URL(dbURL)
	if err != nil {
		panic(err) // NewCutProxy parsed the same URL
	}
	return u
}
