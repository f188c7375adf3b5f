// Package freeport picks a free TCP port on the loopback interface, for
// servers whose address must be known before they start: the embedded
// PostgreSQL, replicas run as processes by the HA check and the tests.
//
// The port is free when Port returns; another program may take it before
// the server binds it, so callers that can bind ":0" themselves should.
package freeport

import (
	"fmt"
	"net"
	"strconv"
)

// Port returns a port on 127.0.0.1 that nothing listens on.
func Port() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns "127.0.0.1:PORT" for a free port.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
