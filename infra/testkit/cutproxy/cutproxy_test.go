package cutproxy

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with itself until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return "postgres://u@" + ln.Addr().String() + "/db?sslmode=disable"
}

func dialThrough(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echo sends a line and reports whether it came back.
func echo(c net.Conn, line string) bool {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return false
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && got == line+"\n"
}

func TestProxy(t *testing.T) {
	t.Parallel()
	target := echoServer(t)
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)

	before := dialThrough(t, p)
	if !echo(before, "through") {
		t.Fatal("nothing came back through the proxy")
	}
	p.Cut()
	if echo(before, "after the cut") {
		t.Fatal("a connection open before the cut still works")
	}
	if p.Closed() != 2 {
		t.Fatalf("the cut closed %d connection ends, want 2", p.Closed())
	}
	during := dialThrough(t, p)
	if echo(during, "while cut") {
		t.Fatal("a connection made while cut works")
	}
	if u, _ := p.URL(target); u != "postgres://u@"+p.Addr()+"/db?sslmode=disable" {
		t.Fatalf("URL = %s, not the target's pointed at %s", u, p.Addr())
	}
	if p.Refused() < 1 {
		t.Fatalf("refused %d connections while cut, want 1", p.Refused())
	}
	p.Restore()
	if !echo(dialThrough(t, p), "restored") {
		t.Fatal("a connection made after Restore does not work")
	}
}

func TestStartRefusesAURLWithoutHost(t *testing.T) {
	t.Parallel()
	if _, err := Start("postgres:///db"); err == nil {
		t.Fatal("Start accepted a URL without a host")
	}
}
