package web

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-chi/httprate"

	"github.com/switchboard/switchboard/infra/config"
)

// clientIPs resolves every request's client IP once, with chi's ClientIPFrom*
// middlewares: the socket peer, unless the peer is a trusted proxy; then the
// header that proxy sets. X-Forwarded-For is read right to left, skipping
// trusted hops, and the first untrusted address is the client (whatever a
// client wrote further left is ignored); another header (Fly-Client-IP, ...)
// holds one address, its last value wins. Without trusted proxies headers are
// never read, so a client cannot choose its own rate limit key.
func clientIPs(trusted []string, header string, logger *slog.Logger) func(http.Handler) http.Handler {
	var prefixes []string
	for _, p := range trusted {
		n, err := config.ParseCIDROrIP(p)
		if err != nil {
			// Config validation rejects these; ignoring one only trusts less.
			logger.Error("ignoring an invalid trusted proxy", "proxy", p, "error", err)
			continue
		}
		prefixes = append(prefixes, n.String())
	}
	switch {
	case len(prefixes) == 0:
		return middleware.ClientIPFromRemoteAddr
	case header == "" || http.CanonicalHeaderKey(header) == "X-Forwarded-For":
		return middleware.ClientIPFromXFF(prefixes...)
	default:
		return middleware.ClientIPFromHeader(header, prefixes...)
	}
}

// clientIP is the rate limit key of a request's client: its address
// (clientAddr), IPv6 reduced to its /64 (a client owns a whole /64).
func clientIP(ctx context.Context, remoteAddr string) string {
	ip, ok := resolvedAddr(ctx, remoteAddr)
	if !ok {
		return remoteAddr
	}
	return httprate.CanonicalizeIP(ip.String())
}

// clientSite is the IPv6 /48 of a request's client (a site: what one
// customer of a provider is often given), for the auth limit's second
// count; false for IPv4.
func clientSite(ctx context.Context, remoteAddr string) (string, bool) {
	ip, ok := resolvedAddr(ctx, remoteAddr)
	if !ok || !ip.Is6() {
		return "", false
	}
	return netip.PrefixFrom(ip, 48).Masked().String(), true
}

// clientAddr is the client's address as logged: the address clientIPs
// resolved, whole (not the /64 the rate limit counts).
func clientAddr(ctx context.Context, remoteAddr string) string {
	ip, ok := resolvedAddr(ctx, remoteAddr)
	if !ok {
		return remoteAddr
	}
	return ip.String()
}

// resolvedAddr is the address clientIPs resolved, else the socket peer (a
// trusted proxy that sent no header, or one that does not parse: chi fails
// closed); IPv4-mapped addresses unmapped, zones dropped.
func resolvedAddr(ctx context.Context, remoteAddr string) (netip.Addr, bool) {
	ip := middleware.GetClientIPAddr(ctx)
	if !ip.IsValid() {
		host, _, err := net.SplitHostPort(remoteAddr)
		if err != nil {
			host = remoteAddr
		}
		if ip, err = netip.ParseAddr(host); err != nil {
			return netip.Addr{}, false
		}
	}
	return ip.Unmap().WithZone(""), true
}
