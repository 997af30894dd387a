package stringers

import (
	"net/netip"
	"slices"
	"testing"
)

func TestJoin(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::2")
	for _, tt := range []struct {
		in        []netip.Addr
		sep, none string
		want      string
	}{
		{nil, ", ", "none", "none"},
		{[]netip.Addr{}, ",", "", ""},
		{[]netip.Addr{a}, ", ", "none", "10.0.0.1"},
		{[]netip.Addr{a, b}, ",", "none", "10.0.0.1,fd00::2"},
	} {
		if got := Join(tt.in, tt.sep, tt.none); got != tt.want {
			t.Errorf("Join(%v, %q, %q) = %q, want %q", tt.in, tt.sep, tt.none, got, tt.want)
		}
	}
	if got := Strings([]netip.Addr{b, a}); !slices.Equal(got, []string{"fd00::2", "10.0.0.1"}) {
		t.Errorf("Strings = %q, want the order kept", got)
	}
	if got := Strings[netip.Addr](nil); got == nil || len(got) != 0 {
		t.Errorf("Strings(nil) = %#v, want an empty slice", got)
	}
}
