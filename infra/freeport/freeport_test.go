package freeport

import (
	"net"
	"testing"
)

func TestAddrCanBeBound(t *testing.T) {
	t.Parallel()
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	l.Close()
}

func TestPortsDiffer(t *testing.T) {
	t.Parallel()
	// The kernel hands out ephemeral ports in turn: two calls in a row do
	// not return the same one.
	a, errA := Port()
	b, errB := Port()
	if errA != nil || errB != nil || a == b || a == 0 {
		t.Fatalf("ports %d, %d: %v %v", a, b, errA, errB)
	}
}
