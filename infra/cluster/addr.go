package cluster

import (
	"net"
	"strconv"
)

// AdvertiseAddr picks the host:port the other nodes reach this one at: the
// configured address; else the first private IP given (FLY_PRIVATE_IP, the
// pod IP) with the listen port; else the listen address itself, its
// unspecified host (":8080") replaced by this machine's first non-loopback
// address, or loopback when it has none.
func AdvertiseAddr(configured string, privateIPs []string, listen net.Addr) string {
	if configured != "" {
		return configured
	}
	host, port := "", ""
	if tcp, ok := listen.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
		if !tcp.IP.IsUnspecified() && tcp.IP != nil {
			host = tcp.IP.String()
		}
	} else if listen != nil {
		host, port, _ = net.SplitHostPort(listen.String())
	}
	for _, ip := range privateIPs {
		if ip != "" {
			return net.JoinHostPort(ip, port)
		}
	}
	if host == "" {
		host = interfaceIP()
	}
	return net.JoinHostPort(host, port)
}

// interfaceIP is this machine's first global unicast address, IPv4 first.
func interfaceIP() string {
	addrs, _ := net.InterfaceAddrs()
	var v6 string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			return n.IP.String()
		}
		if v6 == "" {
			v6 = n.IP.String()
		}
	}
	if v6 != "" {
		return v6
	}
	return "127.0.0.1"
}
