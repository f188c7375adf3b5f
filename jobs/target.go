package jobs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"code.dny.dev/ssrf"
)

// blockedRanges are webhook destinations refused unless private targets are
// allowed: they reach the service's own host, its network, or cloud metadata.
// They are named here for the refusal's message; every other range of the
// IANA special-purpose registries, and IPv6 outside global unicast, is
// refused as well (specialPurpose).
var blockedRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (this-network) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("fc00::/7"), "a private (unique local) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use translation address"},
}

// alwaysBlocked are refused even when private targets are allowed.
var alwaysBlocked = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "a cloud metadata address"},
	{netip.MustParsePrefix("100.100.100.200/32"), "a cloud metadata address"}, // Alibaba Cloud
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// ErrBlockedTarget marks a webhook destination the SSRF guard refuses.
var ErrBlockedTarget = errors.New("webhook target refused")

// CheckTargetIP refuses addresses a webhook must not reach: loopback,
// private, link-local, carrier-grade NAT, unspecified and reserved ranges
// unless allowPrivate, and cloud metadata, multicast and broadcast always.
// IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
// The zone is dropped first (netip's Contains is false for any zoned
// address, and the kernel ignores the zone of a non-link-local one), and an
// IPv4 address embedded by NAT64, SIIT, 6to4 or the IPv4-compatible form is
// judged as itself as well.
func CheckTargetIP(ip netip.Addr, allowPrivate bool) error {
	ip = ip.WithZone("").Unmap()
	if v4, ok := embeddedIPv4(ip); ok {
		if err := CheckTargetIP(v4, allowPrivate); err != nil {
			return err
		}
	}
	for _, r := range alwaysBlocked {
		if r.prefix.Contains(ip) {
			return fmt.Errorf("%w: %s is %s", ErrBlockedTarget, ip, r.what)
		}
	}
	if allowPrivate {
		return nil
	}
	what := ""
	for _, r := range blockedRanges {
		if r.prefix.Contains(ip) {
			what = r.what
			break
		}
	}
	if what == "" {
		what = specialPurpose(ip)
	}
	if what != "" {
		return fmt.Errorf("%w: %s is %s (set SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true to allow)", ErrBlockedTarget, ip, what)
	}
	return nil
}

// specialPurpose names what ip is when the IANA special-purpose address
// registries (IPv4 and IPv6, as code.dny.dev/ssrf encodes them) list it, or
// when an IPv6 address is outside global unicast (2000::/3); "" when it is
// neither. An IPv6 address that carries an IPv4 one (NAT64, SIIT, 6to4,
// IPv4-compatible) was judged as that address already.
func specialPurpose(ip netip.Addr) string {
	if ip.Is4() {
		if containedIn(ssrf.IPv4DeniedPrefixes, ip) {
			return "an IANA special-purpose address"
		}
		return ""
	}
	if _, translated := embeddedIPv4(ip); translated {
		return ""
	}
	switch {
	case !ssrf.IPv6GlobalUnicast.Contains(ip):
		return "not a global unicast address"
	case containedIn(ssrf.IPv6DeniedPrefixes, ip):
		return "an IANA special-purpose address"
	}
	return ""
}

func containedIn(prefixes []netip.Prefix, ip netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// embeddedIPv4 returns the IPv4 address inside a NAT64 (64:ff9b::/96), SIIT
// IPv4-translated (::ffff:0:0/96), 6to4 (2002::/16) or IPv4-compatible
// (::/96) address: through a translator those reach the IPv4 address,
// private ones included.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip), siit.Contains(ip), ipv4Compatible.Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

var (
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	siit           = netip.MustParsePrefix("::ffff:0:0:0/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	ipv4Compatible = netip.MustParsePrefix("::/96")
)

// CheckWebhookURL validates a webhook URL when a task is saved: an absolute
// http(s) URL with a host, not a literal address or name the guard would
// refuse anyway. Names are resolved only when the call is made.
func CheckWebhookURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return errors.New("action.url is required for a webhook")
	case len(raw) > 2048:
		return errors.New("action.url is longer than 2048 characters")
	case err != nil:
		return fmt.Errorf("action.url is not a valid URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("action.url must start with http:// or https://, got %q", raw)
	case u.Hostname() == "":
		return fmt.Errorf("action.url %q has no host", raw)
	case u.User != nil:
		return errors.New("action.url must not carry credentials; send them in action.headers")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := CheckTargetIP(ip, allowPrivate); err != nil {
			return fmt.Errorf("action.url: %w", err)
		}
		return nil
	}
	if ip := net.ParseIP(host); ip == nil && looksNumeric(host) {
		// 2130706433, 0x7f.1, 0177.0.0.1: forms resolvers read as addresses.
		return fmt.Errorf("action.url: host %q is an address in an unusual notation; write it as a dotted quad", host)
	}
	if !allowPrivate && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
		return fmt.Errorf("action.url: %w: %s is a loopback name (set SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true to allow)", ErrBlockedTarget, host)
	}
	return nil
}

// looksNumeric reports a host made only of digits, dots and hex markers.
func looksNumeric(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	for _, c := range last {
		if !strings.ContainsRune("0123456789xXabcdefABCDEF", c) {
			return false
		}
	}
	return strings.ContainsAny(last[:1], "0123456789")
}
