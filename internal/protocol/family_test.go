package protocol

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestFamilies(t *testing.T) {
	v4, v6, unset := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6, measurev1.IPFamily_IP_FAMILY_UNSPECIFIED
	for _, tt := range []struct {
		ip   string
		want measurev1.IPFamily
	}{{"10.0.0.1", v4}, {"fd00::1", v6}, {"::ffff:10.0.0.1", v4}, {"", unset}} {
		a, _ := netip.ParseAddr(tt.ip)
		if got := FamilyOf(a); got != tt.want {
			t.Errorf("FamilyOf(%q) = %v, want %v", tt.ip, got, tt.want)
		}
	}
	if ResultFamily(unset) != v4 || FamilyName(unset) != "ipv4" || FamilyName(v6) != "ipv6" {
		t.Error("an unset family must read as IPv4")
	}
	for _, tt := range []struct {
		in      string
		want    []measurev1.IPFamily
		wantErr bool
	}{
		{"", nil, false}, {"all", nil, false}, {"ipv4", []measurev1.IPFamily{v4}, false}, {"IPv6", []measurev1.IPFamily{v6}, false},
		{"dual", []measurev1.IPFamily{v4, v6}, false}, {"ipv5", nil, true}, {"ipv4,ipv6", nil, true},
	} {
		got, err := ParseFamilies(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("ParseFamilies(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), tt.in) {
			t.Errorf("error %q does not name %q", err, tt.in)
		}
	}
	for _, tt := range []struct {
		fs   []measurev1.IPFamily
		want string
	}{{nil, ""}, {[]measurev1.IPFamily{v6, v4}, ""}, {[]measurev1.IPFamily{unset}, "f[0]"}, {[]measurev1.IPFamily{v4, v4}, "f[1]"}, {[]measurev1.IPFamily{9}, "f[0]"}} {
		err := ValidateFamilies("f", tt.fs)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ValidateFamilies(%v) = %v, want %q", tt.fs, err, tt.want)
		}
	}
}

func FuzzParseFamilies(f *testing.F) {
	for _, s := range []string{"", "ipv4", "ipv6", "dual", "v6", "\x00", "DUAL "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := ParseFamilies(s)
		if err != nil {
			return
		}
		if verr := ValidateFamilies("ip_families", fs); verr != nil {
			t.Fatalf("ParseFamilies(%q) = %v, which ValidateFamilies refuses: %v", s, fs, verr)
		}
	})
}

// TestParseFamilyName: the inverse of FamilyName for the known families,
// exact names only.
func TestParseFamilyName(t *testing.T) {
	for _, f := range Families {
		if got, ok := ParseFamilyName(FamilyName(f)); !ok || got != f {
			t.Errorf("ParseFamilyName(%q) = %v, %v; want %v", FamilyName(f), got, ok, f)
		}
	}
	for _, name := range []string{"", "IPv4", "ipv5", "dual", "4", "family(0)"} {
		if got, ok := ParseFamilyName(name); ok {
			t.Errorf("ParseFamilyName(%q) = %v, want none", name, got)
		}
	}
}
