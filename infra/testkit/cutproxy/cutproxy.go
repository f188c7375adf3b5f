// Package cutproxy is a TCP proxy in front of a PostgreSQL server that can
// be cut (every connection through it closes and new ones are refused, as
// when the network or the server goes away) and restored: the outage a
// failover or a restart is to one client, without touching the server or
// its other clients. Tests (through dbtest.NewCutProxy) and the HA check's
// soak (one proxy per replica) use it.
package cutproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
)

// Proxy forwards loopback connections to one server until it is cut.
type Proxy struct {
	ln      net.Listener
	target  string
	done    chan struct{}
	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]struct{}
	refused atomic.Int64
	cuts    atomic.Int64
}

// Start proxies a loopback port to the host and port of dbURL until Close.
func Start(dbURL string) (*Proxy, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, fmt.Errorf("cut proxy: %w", err)
	}
	if u.Host == "" {
		return nil, errors.New("cut proxy: the database URL names no host")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cut proxy: %w", err)
	}
	p := &Proxy{ln: ln, target: u.Host, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go func() {
		defer close(p.done)
		p.accept()
	}()
	return p, nil
}

// Close stops accepting and closes every proxied connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	<-p.done
	p.Cut()
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is dbURL pointed at the proxy.
func (p *Proxy) URL(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("cut proxy: %w", err)
	}
	u.Host = p.Addr()
	return u.String(), nil
}

// Cut closes every proxied connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.cuts.Add(int64(len(p.conns)))
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Refused is how many connections the proxy refused while cut.
func (p *Proxy) Refused() int64 { return p.refused.Load() }

// Closed is how many open connection ends (client and server sides) cuts
// closed.
func (p *Proxy) Closed() int64 { return p.cuts.Load() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
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
		p.forget(client)
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
	p.forget(client, server)
}

// track registers c unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) forget(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}
