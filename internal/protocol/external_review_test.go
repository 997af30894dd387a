package protocol

import (
	"net/netip"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestValidateExternalTargetReview holds the entries a review found
// accepted although a tool would read them otherwise than the check, or
// send where an external target must not go.
func TestValidateExternalTargetReview(t *testing.T) {
	long := "http://web.example.com/" + strings.Repeat("a", MaxExternalURLLength)
	tests := []struct {
		name, address, url string
		wantErr            string // "" means valid
	}{
		// curl (and browsers, inet_aton) read a name whose labels are all
		// numbers, decimal, hex or octal, as an IPv4 address: curl then
		// connects to 127.0.0.1 and ignores the --resolve pin.
		{"hex IPv4 in two labels", "0x7f.1", "", "looks like a number"},
		{"hex IPv4 in one label", "0x7f000001", "http://0x7f000001/", "looks like a number"},
		{"hex last label", "1.2.3.0x4", "", "looks like a number"},
		{"dotted hex", "0x7f.0.0.1", "", "looks like a number"},
		{"numeric top-level label", "x.123", "", "looks like a number"},
		{"numeric last label, trailing dot", "a.b.0.", "", "looks like a number"},
		{"hex-looking but a word", "0xfoo.example.com", "", ""},
		{"digits then letters", "1abc", "", ""},
		{"leading digits label", "123.example.com", "", ""},
		// Unicode case folding (U+212A KELVIN SIGN folds to 'k') made a
		// host that is not the address pass (see also TestASCIIEqualFold).
		{"kelvin sign host", "kube.example.com", "http://\u212aube.example.com/", `character '\u212a' at byte 7: want printable ASCII`},
		{"long s host", "sub.example.com", "http://\u017fub.example.com/", "printable ASCII"},
		// A URL is ASCII; others are whitespace in disguise.
		{"nbsp in path", "web.example.com", "http://web.example.com/\u00a0", "printable ASCII"},
		{"line separator in path", "web.example.com", "http://web.example.com/\u2028", "printable ASCII"},
		{"bounded length", "web.example.com", long, "characters, at most"},
		// Link-local addresses, the cloud metadata service's among them, are
		// no external target.
		{"cloud metadata", "169.254.169.254", "http://169.254.169.254/latest/meta-data/", "link-local"},
		{"IPv4 link-local", "169.254.1.1", "", "link-local"},
		{"IPv6 link-local", "fe80::1", "", "link-local"},
		{"AWS IPv6 metadata", "fd00:ec2::254", "", "cloud metadata"},
		{"Alibaba metadata", "100.100.100.200", "", "cloud metadata"},
		{"private is fine", "10.1.2.3", "http://10.1.2.3:8080/healthz", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateExternalTarget(&measurev1.ExternalTarget{Name: "x", Address: tt.address, HttpUrl: tt.url})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want valid", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("got valid, want an error with %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("got %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckExternalIP(t *testing.T) {
	for _, tt := range []struct {
		ip, wantErr string
	}{
		{"192.0.2.1", ""},
		{"127.0.0.1", ""}, // the agent decides (its --allow-target)
		{"169.254.169.254", "link-local"},
		{"169.254.170.2", "link-local"},
		{"fe80::1", "link-local"},
		{"fd00:ec2::254", "cloud metadata"},
		{"100.100.100.200", "cloud metadata"},
		{"0.0.0.0", "unspecified"},
		{"224.0.0.1", "multicast"},
	} {
		err := CheckExternalIP(netip.MustParseAddr(tt.ip))
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("CheckExternalIP(%s) = %v, want %q", tt.ip, err, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), tt.ip) {
			t.Errorf("CheckExternalIP(%s) = %v: does not name the address", tt.ip, err)
		}
	}
}

func TestASCIIEqualFold(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"Web.Example.COM", "web.example.com", true},
		{"\u212aube", "kube", false}, // strings.EqualFold says true
		{"\u017fub", "sub", false},
		{"a", "ab", false},
		{"[", "{", false},
	} {
		if got := asciiEqualFold(tt.a, tt.b); got != tt.want {
			t.Errorf("asciiEqualFold(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
