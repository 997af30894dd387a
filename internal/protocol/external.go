package protocol

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// MaxExternalTargets bounds the coordinator's allowlist of external
// targets, and so the Endpoints message that carries it to every agent.
const MaxExternalTargets = 256

// MaxExternalURLLength bounds an external target's http_url (bytes), so
// that a full allowlist stays well below gRPC's 4 MiB message limit.
const MaxExternalURLLength = 2048

// metadataIPs are cloud metadata services outside the link-local ranges
// (AWS's IPv6 one, Alibaba Cloud's); see CheckExternalIP.
var metadataIPs = map[netip.Addr]string{
	netip.MustParseAddr("fd00:ec2::254"):   "AWS",
	netip.MustParseAddr("100.100.100.200"): "Alibaba Cloud",
}

// ValidateExternalTarget checks one allowlist entry as both ends read it:
// name a DNS-1123 label (1..63 lower-case alphanumerics and '-', starting
// and ending with an alphanumeric); address an IP that ParseEndpointIP
// accepts or a DNS name (1..253 characters, labels of 1..63 letters,
// digits and '-' not at either end, at least one dot or a single label,
// case-insensitive, the last label not a number such as 1, 0x7f or 0x,
// which curl and browsers read as an IPv4 address); an IP address must
// pass CheckExternalIP; http_url empty or an absolute http/https URL of
// at most MaxExternalURLLength printable ASCII characters whose host is
// address (brackets around IPv6; letters compared ASCII
// case-insensitively), with an optional port 1..65535, and no user
// information, fragment or whitespace; the server ports as
// ValidateExternalPorts checks them. The error names the field and its
// value.
func ValidateExternalTarget(t *measurev1.ExternalTarget) error {
	name := t.GetName()
	if err := ValidateLabel(name); err != nil {
		return fmt.Errorf("external target name %q: %w", name, err)
	}
	if _, err := ParseExternalAddress(t.GetAddress()); err != nil {
		return fmt.Errorf("external target %q: address: %w", name, err)
	}
	if u := t.GetHttpUrl(); u != "" {
		if err := validateExternalURL(u, t.GetAddress()); err != nil {
			return fmt.Errorf("external target %q: http_url %q: %w", name, u, err)
		}
	}
	if err := ValidateExternalPorts(t); err != nil {
		return fmt.Errorf("external target %q: %w", name, err)
	}
	return nil
}

// ValidateExternalPorts checks the server ports of an external target:
// iperf3_port, qperf_port and qperf_data_port each 0 (no such server) or
// a TCP/UDP port 1..65535; qperf_port and qperf_data_port both set or
// both 0 (qperf through a LoadBalancer needs its data port pinned too);
// and the ports that are set distinct from each other (one server per
// port). The error starts with the field's name and value, e.g.
// "qperf_data_port 0: ...".
func ValidateExternalPorts(t *measurev1.ExternalTarget) error {
	ports := []struct {
		field string
		port  uint32
	}{{"iperf3_port", t.GetIperf3Port()}, {"qperf_port", t.GetQperfPort()}, {"qperf_data_port", t.GetQperfDataPort()}}
	for _, p := range ports {
		if p.port > 65535 {
			return fmt.Errorf("%s %d: want a port in 1..65535 (0: no such server)", p.field, p.port)
		}
	}
	switch qp, qd := t.GetQperfPort(), t.GetQperfDataPort(); {
	case qp != 0 && qd == 0:
		return fmt.Errorf("qperf_data_port 0: qperf_port %d needs a qperf_data_port too (the server's pinned data port, qperf -lp/-ip)", qp)
	case qp == 0 && qd != 0:
		return fmt.Errorf("qperf_port 0: qperf_data_port %d needs a qperf_port too (the server's listen port, qperf -lp)", qd)
	}
	for i, p := range ports {
		for _, q := range ports[:i] {
			if p.port != 0 && p.port == q.port {
				return fmt.Errorf("%s %d: already the %s; each server needs a port of its own", p.field, p.port, q.field)
			}
		}
	}
	return nil
}

// ParseExternalAddress parses an external target's address: an IP (as
// ParseEndpointIP and CheckExternalIP accept it) or a DNS name. It
// returns the IP, or the zero Addr for a name; the error names the value.
func ParseExternalAddress(s string) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		if err := CheckExternalIP(ip); err != nil {
			return netip.Addr{}, err
		}
		return ParseEndpointIP(ip.String())
	} else if strings.Trim(s, "0123456789.") == "" || strings.Contains(s, ":") {
		return netip.Addr{}, fmt.Errorf("%q is neither an IP address nor a DNS name", s)
	}
	if err := validateDNSName(s); err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not a DNS name: %w", s, err)
	}
	return netip.Addr{}, nil
}

// ParsePeerIP parses the address of a peer node that a coordinator names
// to an agent, in a probe plan or in Endpoints: what ParseEndpointIP
// accepts and CheckExternalIP lets through (no link-local address, no
// cloud metadata service, none embedded), and no loopback address unless
// allowLoopback (a lab or a simulated fleet on one machine, whose agents
// have loopback host IPs). A node's address is none of those: a
// coordinator that names one would aim the agent's tests at the node's
// own services. The error names the address.
func ParsePeerIP(s string, allowLoopback bool) (netip.Addr, error) {
	ip, err := ParseEndpointIP(s)
	if err != nil {
		return netip.Addr{}, err
	}
	switch why := offLimits(ip); {
	case why != "":
		return netip.Addr{}, fmt.Errorf("%q %s", s, why)
	case ip.IsLoopback() && !allowLoopback:
		return netip.Addr{}, fmt.Errorf("%q is a loopback address", s)
	}
	return ip, nil
}

// CheckExternalIP checks an address an external target may be sent to,
// as written in the allowlist or as its DNS name resolved: what
// ParseEndpointIP accepts, and nothing offLimits refuses. Loopback
// passes: whether a node may measure itself is the agent's decision (its
// --allow-target). The error names the address.
func CheckExternalIP(ip netip.Addr) error {
	if _, err := ParseEndpointIP(ip.String()); err != nil {
		return err
	}
	if why := offLimits(ip); why != "" {
		return fmt.Errorf("%s %s: no external target", ip, why)
	}
	return nil
}

// offLimits says why no test or probe may be sent to ip, whoever names
// it, or returns "": a link-local address (169.254.0.0/16, fe80::/10: the
// cloud metadata service 169.254.169.254 is one, and no target outside
// the node is link-local), one of the cloud metadata services outside
// those ranges (fd00:ec2::254, 100.100.100.200), or an IPv6 form
// (EmbeddedIPv4) of one of those or of an IPv4 loopback address. An
// IPv4-mapped address is judged as its IPv4 address.
func offLimits(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLinkLocalUnicast():
		return "is link-local (169.254.0.0/16 or fe80::/10, where the cloud metadata service 169.254.169.254 is)"
	case metadataIPs[ip] != "":
		return "is the cloud metadata service of " + metadataIPs[ip]
	}
	if v4, ok := EmbeddedIPv4(ip); ok {
		if why := offLimits(v4); why != "" {
			return fmt.Sprintf("embeds %s (IPv4-compatible, IPv4-translated, NAT64 or 6to4), which %s", v4, why)
		}
		if v4.IsLoopback() {
			return fmt.Sprintf("embeds the loopback address %s (IPv4-compatible, IPv4-translated, NAT64 or 6to4)", v4)
		}
	}
	return ""
}

// EmbeddedIPv4 returns the IPv4 address an IPv6 address carries that the
// kernel (sit0) or a translator sends packets to, and true; false for any
// other address (:: and ::1 included, IPv4 addresses and IPv4-mapped
// ::ffff:a.b.c.d, which are IPv4 to the kernel, too). The forms are
// IPv4-compatible ::/96 and IPv4-translated ::ffff:0:0:0/96 (the last 32
// bits), NAT64 64:ff9b::/96 (RFC 6052, the last 32 bits), local-use NAT64
// 64:ff9b:1::/48 (RFC 8215, RFC 6052's /48 layout: bits 48..63 and
// 72..87) and 6to4 2002::/16 (RFC 3056, bits 16..47).
func EmbeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() || ip.Is4In6() || ip.IsLoopback() || ip.IsUnspecified() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case compat4.Contains(ip), translated4.Contains(ip), nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:])), true
	case localNAT64.Contains(ip):
		return netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// The IPv6 prefixes whose addresses carry an IPv4 address (EmbeddedIPv4).
var (
	compat4     = netip.MustParsePrefix("::/96")
	translated4 = netip.MustParsePrefix("::ffff:0:0:0/96")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	localNAT64  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// ValidateLabel checks that s is a DNS-1123 label: 1..63 lower-case
// alphanumerics and '-', an alphanumeric at both ends (an external
// target's name, each label of a DNS name, a Kubernetes object name's
// part). The error says what is wrong, without s.
func ValidateLabel(s string) error {
	if s == "" || len(s) > 63 {
		return errors.New("must be 1..63 characters")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '-' || (i == 0 || i == len(s)-1) && !alnum {
			return errors.New("want a DNS-1123 label: lower-case alphanumerics and '-', alphanumeric at both ends")
		}
	}
	return nil
}

func validateDNSName(s string) error {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return errors.New("must be 1..253 characters")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if err := ValidateLabel(strings.ToLower(l)); err != nil {
			return fmt.Errorf("label %q: %w", l, err)
		}
	}
	if last := labels[len(labels)-1]; isNumber(last) {
		return fmt.Errorf("last label %q looks like a number: curl and browsers read such a name as an IPv4 address", last)
	}
	return nil
}

// isNumber reports whether a label is a number as inet_aton, curl and the
// WHATWG URL parser read an IPv4 part: decimal (octal with a leading 0)
// digits, or 0x or 0X and hex digits (none too).
func isNumber(l string) bool {
	digits := "0123456789"
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		l, digits = l[2:], "0123456789abcdefABCDEF"
		if l == "" {
			return true
		}
	}
	return l != "" && strings.Trim(l, digits) == ""
}

// asciiEqualFold is strings.EqualFold for ASCII letters only: U+212A
// KELVIN SIGN is no 'k' here.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func validateExternalURL(raw, address string) error {
	if len(raw) > MaxExternalURLLength {
		return fmt.Errorf("%d characters, at most %d", len(raw), MaxExternalURLLength)
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return errors.New("has whitespace")
	}
	if i := strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r >= 0x7f }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(raw[i:])
		return fmt.Errorf("character %+q at byte %d: want printable ASCII (percent-encode the rest)", r, i)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if err := CheckHTTPURL(u, raw); err != nil {
		return err
	}
	if !asciiEqualFold(u.Hostname(), strings.TrimSuffix(address, ".")) && !asciiEqualFold(u.Hostname(), address) {
		return fmt.Errorf("host %q is not the target's address %q", u.Hostname(), address)
	}
	return nil
}

// CheckHTTPURL checks what every http URL meshperf takes must be (an
// external target's http_url on both ends, remote write's receiver): the
// scheme http or https; absolute with a host (not an opaque URL, the host
// not empty); no user information; no fragment; a port, if written, of
// 1..65535 in plain decimal, and no empty one ("host:/"). u is raw as
// url.Parse read it. The error says what is wrong; the caller names the
// field and the value.
func CheckHTTPURL(u *url.URL, raw string) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Opaque != "" || u.Hostname() == "":
		return errors.New("not an absolute URL with a host")
	case u.User != nil:
		return errors.New("user information is not allowed")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("a fragment is not allowed")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != p {
			return fmt.Errorf("port %q: want 1..65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return errors.New("empty port")
	}
	return nil
}
