package protocol

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// MaxExternalTargets bounds the coordinator's allowlist of external
// targets, and so the Endpoints message that carries it to every agent.
const MaxExternalTargets = 256

// ValidateExternalTarget checks one allowlist entry as both ends read it:
// name a DNS-1123 label (1..63 lower-case alphanumerics and '-', starting
// and ending with an alphanumeric); address an IP that ParseEndpointIP
// accepts or a DNS name (1..253 characters, labels of 1..63 letters,
// digits and '-' not at either end, at least one dot or a single label,
// case-insensitive); http_url empty or an absolute http/https URL whose
// host is address (brackets around IPv6), with an optional port 1..65535,
// and no user information, fragment or whitespace. The error names the
// field and its value.
func ValidateExternalTarget(t *agentv1.ExternalTarget) error {
	name := t.GetName()
	if err := validateLabel(name); err != nil {
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
	return nil
}

// ParseExternalAddress parses an external target's address: an IP (as
// ParseEndpointIP accepts it) or a DNS name. It returns the IP, or the
// zero Addr for a name; the error names the value.
func ParseExternalAddress(s string) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ParseEndpointIP(ip.String())
	} else if strings.Trim(s, "0123456789.") == "" || strings.Contains(s, ":") {
		return netip.Addr{}, fmt.Errorf("%q is neither an IP address nor a DNS name", s)
	}
	if err := validateDNSName(s); err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not a DNS name: %w", s, err)
	}
	return netip.Addr{}, nil
}

func validateLabel(s string) error {
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
	for _, l := range strings.Split(s, ".") {
		if err := validateLabel(strings.ToLower(l)); err != nil {
			return fmt.Errorf("label %q: %w", l, err)
		}
	}
	return nil
}

func validateExternalURL(raw, address string) error {
	if strings.ContainsAny(raw, " \t\r\n") {
		return errors.New("has whitespace")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Opaque != "":
		return errors.New("not an absolute URL with a host")
	case u.User != nil:
		return errors.New("user information is not allowed")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("a fragment is not allowed")
	case !strings.EqualFold(u.Hostname(), strings.TrimSuffix(address, ".")) && !strings.EqualFold(u.Hostname(), address):
		return fmt.Errorf("host %q is not the target's address %q", u.Hostname(), address)
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 || fmt.Sprint(n) != p {
			return fmt.Errorf("port %q: want 1..65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return errors.New("empty port")
	}
	return nil
}
