package protocol

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestValidateExternalTarget(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name, tname, address, url string
		wantErr                   string // "" means valid
	}{
		{"ip, no url", "lb-web", "203.0.113.10", "", ""},
		{"dns name with url", "ingress", "web.example.com", "https://web.example.com/healthz?x=1", ""},
		{"name with port", "ingress", "web.example.com", "http://web.example.com:8080/", ""},
		{"ipv6 url", "v6", "2001:db8::1", "http://[2001:db8::1]:80/", ""},
		{"trailing dot name", "fqdn", "web.example.com.", "", ""},
		{"upper-case host", "ingress", "Web.Example.com", "http://web.example.com/", ""},
		{"single label", "other-node", "node-7", "", ""},
		{"empty name", "", "203.0.113.10", "", `external target name ""`},
		{"upper-case name", "LB", "203.0.113.10", "", `external target name "LB"`},
		{"name too long", long, "203.0.113.10", "", "1..63"},
		{"name with dot", "a.b", "203.0.113.10", "", "DNS-1123 label"},
		{"empty address", "x", "", "", `address: "" is neither`},
		{"multicast", "x", "224.0.0.1", "", "multicast"},
		{"unspecified", "x", "0.0.0.0", "", "unspecified"},
		{"broken ip", "x", "10.0.0.300", "", "neither an IP address nor a DNS name"},
		{"option-like name", "x", "-c.example.com", "", "not a DNS name"},
		{"underscore", "x", "a_b.example.com", "", "not a DNS name"},
		{"address with port", "x", "10.0.0.1:80", "", "neither"},
		{"url other host", "x", "web.example.com", "http://evil.example.com/", `host "evil.example.com" is not the target's address`},
		{"url scheme", "x", "web.example.com", "ftp://web.example.com/", `scheme "ftp"`},
		{"url userinfo", "x", "web.example.com", "http://u:p@web.example.com/", "user information"},
		{"url fragment", "x", "web.example.com", "http://web.example.com/#a", "fragment"},
		{"url space", "x", "web.example.com", "http://web.example.com/a b", "whitespace"},
		{"url port 0", "x", "web.example.com", "http://web.example.com:0/", `port "0"`},
		{"url port big", "x", "web.example.com", "http://web.example.com:70000/", `port "70000"`},
		{"url relative", "x", "web.example.com", "/healthz", `scheme ""`},
		{"url opaque", "x", "web.example.com", "http:web.example.com", "absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateExternalTarget(&measurev1.ExternalTarget{Name: tt.tname, Address: tt.address, HttpUrl: tt.url})
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestValidateExternalPorts(t *testing.T) {
	tests := []struct {
		name                  string
		iperf3, qperf, qpData uint32
		wantErr               string // "" means valid
	}{
		{"none", 0, 0, 0, ""},
		{"iperf3 only", 5201, 0, 0, ""},
		{"qperf only", 0, 19765, 19766, ""},
		{"all", 5201, 19765, 19766, ""},
		{"edges", 1, 65535, 2, ""},
		{"iperf3 too big", 65536, 0, 0, "iperf3_port 65536: want a port in 1..65535"},
		{"qperf too big", 0, 70000, 19766, "qperf_port 70000: want a port in 1..65535"},
		{"data too big", 0, 19765, 1 << 20, "qperf_data_port 1048576: want a port in 1..65535"},
		{"qperf without data", 0, 19765, 0, "qperf_data_port 0: qperf_port 19765 needs a qperf_data_port"},
		{"data without qperf", 0, 0, 19766, "qperf_port 0: qperf_data_port 19766 needs a qperf_port"},
		{"qperf ports equal", 0, 19765, 19765, "qperf_data_port 19765: already the qperf_port"},
		{"iperf3 is qperf's", 19765, 19765, 19766, "qperf_port 19765: already the iperf3_port"},
		{"iperf3 is qperf data", 19766, 19765, 19766, "qperf_data_port 19766: already the iperf3_port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &measurev1.ExternalTarget{Name: "lb", Address: "203.0.113.10", Iperf3Port: tt.iperf3, QperfPort: tt.qperf, QperfDataPort: tt.qpData}
			checkErr(t, ValidateExternalPorts(e), tt.wantErr)
			err := ValidateExternalTarget(e)
			if tt.wantErr != "" {
				tt.wantErr = `external target "lb": ` + tt.wantErr
			}
			checkErr(t, err, tt.wantErr)
		})
	}
}

// checkErr fails t unless err is nil for wantErr "", or contains wantErr.
func checkErr(t *testing.T, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("got %v, want valid", err)
	case wantErr != "" && err == nil:
		t.Fatalf("got valid, want an error with %q", wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("got %q, want it to contain %q", err, wantErr)
	}
}

func TestParseExternalAddress(t *testing.T) {
	tests := []struct {
		in     string
		wantIP string // "" for a name
	}{
		{"203.0.113.10", "203.0.113.10"},
		{"2001:db8::1", "2001:db8::1"},
		{"web.example.com", ""},
	}
	for _, tt := range tests {
		ip, err := ParseExternalAddress(tt.in)
		if err != nil {
			t.Fatalf("ParseExternalAddress(%q): %v", tt.in, err)
		}
		got := ""
		if ip.IsValid() {
			got = ip.String()
		}
		if got != tt.wantIP {
			t.Errorf("ParseExternalAddress(%q) = %q, want %q", tt.in, got, tt.wantIP)
		}
	}
}

// FuzzValidateExternalTarget checks that a valid entry is safe to hand to
// a tool: no argument that starts with '-', no whitespace, and an URL host
// that is the address, as curl reads it too: the authority as written (no
// percent-encoding for Go to decode), printable ASCII, bounded, and a DNS
// name that curl cannot take for an IPv4 address; an IP address passes
// CheckExternalIP.
func FuzzValidateExternalTarget(f *testing.F) {
	f.Add("lb", "203.0.113.10", "http://203.0.113.10:8080/x")
	f.Add("ingress", "web.example.com", "https://web.example.com/")
	f.Add("x", "-oProxyCommand", "")
	f.Add("x", "a..b", "http://a..b/")
	f.Add("x", "0x7f.1", "http://0x7f.1/")
	f.Add("x", "kube.example.com", "http://\u212aube.example.com/")
	f.Add("x", "169.254.169.254", "http://169.254.169.254/")
	f.Add("x", "web.example.com", "http://web%2eexample.com/")
	f.Add("x", "web.example.com", "http://web.example.com:80@evil/")
	f.Add("x", "web.example.com", "http://web.example.com\\@evil/")
	f.Add("x", "2001:db8::1", "http://[2001:db8::1%25eth0]/")
	f.Add("x", "64:ff9b::169.254.169.254", "http://[64:ff9b::a9fe:a9fe]/")
	f.Fuzz(func(t *testing.T, name, address, rawURL string) {
		if ValidateExternalTarget(&measurev1.ExternalTarget{Name: name, Address: address, HttpUrl: rawURL}) != nil {
			return
		}
		if strings.HasPrefix(address, "-") || strings.HasPrefix(rawURL, "-") || strings.ContainsAny(address+rawURL, " \t\r\n\x00") {
			t.Fatalf("accepted unsafe entry %q %q %q", name, address, rawURL)
		}
		if address == "" || name == "" {
			t.Fatalf("accepted empty field: %q %q", name, address)
		}
		if ip, err := netip.ParseAddr(address); err == nil {
			if err := CheckExternalIP(ip); err != nil {
				t.Fatalf("accepted address %q: %v", address, err)
			}
		} else {
			labels := strings.Split(strings.TrimSuffix(address, "."), ".")
			if isNumber(labels[len(labels)-1]) {
				t.Fatalf("accepted address %q, which curl reads as an IPv4 address", address)
			}
		}
		if rawURL == "" {
			return
		}
		if len(rawURL) > MaxExternalURLLength || strings.IndexFunc(rawURL, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0 {
			t.Fatalf("accepted http_url %q: too long or not printable ASCII", rawURL)
		}
		u, err := url.Parse(rawURL)
		if err != nil {
			t.Fatalf("accepted http_url %q that url.Parse refuses: %v", rawURL, err)
		}
		_, rest, _ := strings.Cut(rawURL, "://")
		authority := rest[:strings.IndexAny(rest+"/", "/?#")]
		if authority != u.Host {
			t.Fatalf("accepted http_url %q: curl reads the authority %q, Go %q", rawURL, authority, u.Host)
		}
		host := strings.ToLower(u.Hostname())
		if want := strings.ToLower(strings.TrimSuffix(address, ".")); host != want && host != strings.ToLower(address) {
			t.Fatalf("accepted http_url %q whose host %q is not the address %q", rawURL, u.Hostname(), address)
		}
	})
}

// FuzzValidateExternalPorts checks that accepted server ports are ports a
// tool can be given: each 0 or 1..65535, qperf's two together, the set
// ones distinct; and that a refusal names a field.
func FuzzValidateExternalPorts(f *testing.F) {
	f.Add(uint32(5201), uint32(19765), uint32(19766))
	f.Add(uint32(0), uint32(19765), uint32(0))
	f.Add(uint32(19765), uint32(19765), uint32(19766))
	f.Add(uint32(65536), uint32(0), uint32(0))
	f.Add(uint32(0), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, iperf3, qperf, data uint32) {
		err := ValidateExternalPorts(&measurev1.ExternalTarget{Iperf3Port: iperf3, QperfPort: qperf, QperfDataPort: data})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "iperf3_port ") && !strings.HasPrefix(err.Error(), "qperf_port ") &&
				!strings.HasPrefix(err.Error(), "qperf_data_port ") {
				t.Fatalf("refusal %q names no field", err)
			}
			return
		}
		if iperf3 > 65535 || qperf > 65535 || data > 65535 || (qperf == 0) != (data == 0) {
			t.Fatalf("accepted ports %d %d %d", iperf3, qperf, data)
		}
		if qperf != 0 && (qperf == data || qperf == iperf3 || data == iperf3) {
			t.Fatalf("accepted shared ports %d %d %d", iperf3, qperf, data)
		}
	})
}

// TestParsePeerIP: a peer node's address is a routable unicast address:
// link-local, cloud metadata, loopback (outside a lab on loopback) and
// IPv6 forms of those (IPv4-compatible, NAT64, local-use NAT64, 6to4)
// are refused, naming the address.
func TestParsePeerIP(t *testing.T) {
	for _, tt := range []struct {
		in       string
		loopback bool
		wantErr  string // "" means valid
	}{
		{"10.244.1.2", false, ""},
		{"fd00:10:244::2", false, ""},
		{"127.0.0.1", true, ""},
		{"::1", true, ""},
		{"127.0.0.1", false, `"127.0.0.1" is a loopback address`},
		{"::1", false, `"::1" is a loopback address`},
		{"169.254.169.254", true, `"169.254.169.254" is link-local`},
		{"fe80::1", false, `"fe80::1" is link-local`},
		{"fd00:ec2::254", false, `"fd00:ec2::254" is the cloud metadata service of`},
		{"100.100.100.200", false, `"100.100.100.200" is the cloud metadata service of`},
		{"::7f00:1", true, `"::7f00:1" embeds the loopback address 127.0.0.1`},
		{"64:ff9b::a9fe:a9fe", false, `embeds 169.254.169.254`},
		{"64:ff9b:1:a9fe:a9:fe00::", false, `embeds 169.254.169.254`},     // local-use NAT64, RFC 6052's /48 layout
		{"2002:7f00:1::1", true, `embeds the loopback address 127.0.0.1`}, // 6to4
		{"2002:a9fe:a9fe::1", false, `embeds 169.254.169.254`},
		{"2002:a00:1::1", false, ""}, // 6to4 of a private address: a routable peer
		{"0.0.0.0", false, "unspecified"},
		{"::ffff:10.0.0.1", false, "IPv4-mapped"},
		{"node-1", false, "not an IP address"},
	} {
		ip, err := ParsePeerIP(tt.in, tt.loopback)
		checkErr(t, err, tt.wantErr)
		if tt.wantErr == "" && ip != netip.MustParseAddr(tt.in) {
			t.Errorf("ParsePeerIP(%q) = %v", tt.in, ip)
		}
	}
}

// FuzzParsePeerIP: whatever the text, an accepted address is valid and
// none of the refused kinds.
func FuzzParsePeerIP(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "::1", "169.254.169.254", "fe80::1%eth0", "::7f00:1", "64:ff9b::7f00:1", "64:ff9b:1:7f00:0:100::", "2002:7f00:1::", "garbage"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, loopback bool) {
		ip, err := ParsePeerIP(s, loopback)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Errorf("ParsePeerIP(%q): error %q does not name the address", s, err)
			}
			return
		}
		if !ip.IsValid() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() || ip.Is4In6() || ip.Zone() != "" ||
			(ip.IsLoopback() && !loopback) || metadataIPs[ip] != "" {
			t.Errorf("ParsePeerIP(%q, %v) = %v, a refused kind", s, loopback, ip)
		}
		if v4, ok := EmbeddedIPv4(ip); ok && (v4.IsLoopback() || v4.IsLinkLocalUnicast()) {
			t.Errorf("ParsePeerIP(%q) = %v, embedding %v", s, ip, v4)
		}
	})
}
