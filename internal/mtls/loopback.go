package mtls

import "net/netip"

// LoopbackHost reports whether host (a name or an IP address, no port)
// is "localhost" or a loopback IP: the only hosts meshperf talks plain
// HTTP to, or listens on without TLS, when a token is involved (the web
// UI without --web-tls-cert, remote write to an http:// URL with a bearer
// token), since traffic to them does not leave the machine.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
