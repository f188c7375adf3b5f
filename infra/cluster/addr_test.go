package cluster

import (
	"net"
	"testing"
)

func TestAdvertiseAddr(t *testing.T) {
	t.Parallel()
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7001}
	unspecified := &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}
	for _, tc := range []struct {
		name       string
		configured string
		private    []string
		listen     net.Addr
		want       string
	}{
		{"configured wins", "node-a.internal:9000", []string{"10.0.0.5"}, loopback, "node-a.internal:9000"},
		{"fly private ip with the listen port", "", []string{"fdaa:0:1::3", ""}, unspecified, "[fdaa:0:1::3]:8080"},
		{"pod ip when fly's is unset", "", []string{"", "10.1.2.3"}, unspecified, "10.1.2.3:8080"},
		{"listener address", "", nil, loopback, "127.0.0.1:7001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := AdvertiseAddr(tc.configured, tc.private, tc.listen); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("unspecified host becomes a reachable one", func(t *testing.T) {
		t.Parallel()
		host, port, err := net.SplitHostPort(AdvertiseAddr("", nil, unspecified))
		if err != nil || port != "8080" || net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified() {
			t.Fatalf("got host %q port %q (%v)", host, port, err)
		}
	})
}
