package web

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestClientIP(t *testing.T) {
	t.Parallel()
	proxies := []string{"10.0.0.0/8", "127.0.0.1", "fd00::/8"}
	for _, tc := range []struct {
		name    string
		trusted []string
		header  string
		peer    string
		xff     []string
		fly     string
		want    string
	}{
		{name: "peer, no proxies configured", peer: "203.0.113.7:5555", want: "203.0.113.7"},
		{name: "spoofed XFF, no proxies configured", peer: "203.0.113.7:5555", xff: []string{"198.51.100.1"}, want: "203.0.113.7"},
		{name: "spoofed XFF from an untrusted peer", trusted: proxies, peer: "203.0.113.7:5555", xff: []string{"198.51.100.1"}, want: "203.0.113.7"},
		{name: "spoofed Fly-Client-IP from an untrusted peer", trusted: proxies, header: "Fly-Client-IP", peer: "203.0.113.7:5555", fly: "198.51.100.1", want: "203.0.113.7"},
		{name: "XFF from a trusted proxy", trusted: proxies, peer: "10.1.2.3:80", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "right-most untrusted hop wins", trusted: proxies, peer: "10.1.2.3:80", xff: []string{"6.6.6.6, 198.51.100.1, 10.9.9.9"}, want: "198.51.100.1"},
		{name: "XFF split over headers", trusted: proxies, peer: "10.1.2.3:80", xff: []string{"6.6.6.6", "198.51.100.2, 10.0.0.1"}, want: "198.51.100.2"},
		{name: "only trusted hops: the peer", trusted: proxies, peer: "10.1.2.3:80", xff: []string{"10.0.0.9"}, want: "10.1.2.3"},
		{name: "no header from a trusted proxy: the peer", trusted: proxies, peer: "127.0.0.1:80", want: "127.0.0.1"},
		{name: "garbage right of the client fails closed to the peer", trusted: proxies, peer: "10.1.2.3:80", xff: []string{"198.51.100.1, nonsense"}, want: "10.1.2.3"},
		{name: "garbage left of the client is ignored", trusted: proxies, peer: "10.1.2.3:80", xff: []string{"nonsense, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "Fly-Client-IP from a trusted proxy", trusted: proxies, header: "Fly-Client-IP", peer: "10.1.2.3:80", fly: "198.51.100.3", want: "198.51.100.3"},
		{name: "Fly-Client-IP mode ignores XFF", trusted: proxies, header: "Fly-Client-IP", peer: "10.1.2.3:80", xff: []string{"198.51.100.1"}, want: "10.1.2.3"},
		{name: "IPv6 client keyed by its /64", peer: "[2001:db8:1:2:3:4:5:6]:443", want: "2001:db8:1:2::"},
		{name: "IPv4-mapped peer", peer: "[::ffff:203.0.113.9]:443", want: "203.0.113.9"},
		{name: "IPv6 client behind an IPv6 proxy", trusted: proxies, peer: "[fd00::1]:80", xff: []string{"2001:db8:9:9:1::1"}, want: "2001:db8:9:9::"},
		{name: "mapped alias of a trusted proxy is still trusted", trusted: proxies, peer: "10.1.2.3:80", xff: []string{"198.51.100.1, ::ffff:10.0.0.5"}, want: "198.51.100.1"},
		{name: "unparsable peer", peer: "pipe", want: "pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got string
			h := clientIPs(tc.trusted, tc.header, slog.New(slog.DiscardHandler))(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got = clientIP(r.Context(), r.RemoteAddr)
			}))
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if tc.fly != "" {
				r.Header.Set("Fly-Client-IP", tc.fly)
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got != tc.want {
				t.Fatalf("client ip %q, want %q", got, tc.want)
			}
		})
	}
}
