package dbtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// CutProxy is a TCP proxy in front of a test database that a test can cut
// (every connection through it closes and new ones are refused, as when the
// network or the server goes away) and restore: the outage a failover or a
// restart is to a client, without touching the server other tests share.
type CutProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]struct{}
	refused atomic.Int64
}

// NewCutProxy proxies to the host and port of dbURL until the test ends.
func NewCutProxy(t testing.TB, dbURL string) *CutProxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.accept()
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		p.Cut()
	})
	return p
}

// URL is dbURL pointed at the proxy.
func (p *CutProxy) URL(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		panic(err) // NewCutProxy parsed the same URL
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// Cut closes every proxied connection and refuses new ones until Restore.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore lets connections through again.
func (p *CutProxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Refused is how many connections the proxy refused while cut.
func (p *CutProxy) Refused() int64 { return p.refused.Load() }

func (p *CutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *CutProxy) serve(client net.Conn) {
	if !p.track(client) {
		p.refused.Add(1)
		_ = client.Close()
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		_ = client.Close()
		if server != nil {
			_ = server.Close()
		}
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
		return
	}
	var wg sync.WaitGroup
	for _, pair := range [][2]net.Conn{{server, client}, {client, server}} {
		wg.Go(func() {
			_, _ = io.Copy(pair[0], pair[1])
			// One side ended: end the other, as a broken link does.
			_ = pair[0].Close()
			_ = pair[1].Close()
		})
	}
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// track registers c unless the proxy is cut.
func (p *CutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}
