package probe

import (
	"net/netip"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestPing6InNetNS: ICMPv6 sockets opened inside a namespace whose lo has
// MTU 1280: echoes to ::1 are answered (the kernel computes the
// checksum), a don't-fragment echo filling the MTU (1280 - 40 - 8 bytes
// of payload) goes out whole, and one byte more fails on send.
func TestPing6InNetNS(t *testing.T) {
	rawOK(t)
	ns := testnet.NewNetNS(t, "mp-probe6")
	name := filepath.Base(ns)
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "mtu", "1280").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo mtu 1280: %v: %s", err, out)
	}
	pg := openPinger(&Network{Net: measurev1.Network_NETWORK_POD, NetNS: ns, IP: netip.MustParseAddr("127.0.0.1"), IPv6: netip.IPv6Loopback()}, true)
	if pg.openErr != nil {
		t.Fatalf("open: %v", pg.openErr)
	}
	box := startReader(t, pg)
	tests := []struct {
		name string
		size int
		df   bool
		want measurev1.Status
	}{
		{name: "small", size: 56, want: measurev1.Status_STATUS_OK},
		{name: "fills the MTU with DF", size: 1280 - 48, df: true, want: measurev1.Status_STATUS_OK},
		{name: "over the MTU with DF", size: 1280 - 48 + 1, df: true, want: measurev1.Status_STATUS_UNREACHABLE},
		{name: "over the MTU without DF", size: 3000, want: measurev1.Status_STATUS_OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, st, msg := ping(t, pg, box, netip.IPv6Loopback(), tt.size, tt.df, 2*time.Second)
			if st != tt.want {
				t.Fatalf("ping6 %d bytes (df %v): %v %q, want %v", tt.size, tt.df, st, msg, tt.want)
			}
		})
	}
}

// TestQuotedEcho6 parses the echo an ICMPv6 error quotes.
func TestQuotedEcho6(t *testing.T) {
	dst := netip.MustParseAddr("fd00::7")
	pkt := make([]byte, 48)
	pkt[0], pkt[6] = 0x60, 58
	a := dst.As16()
	copy(pkt[24:40], a[:])
	pkt[40] = icmp6EchoRequest
	pkt[44], pkt[45], pkt[46], pkt[47] = 0x12, 0x34, 0, 9
	tests := []struct {
		name   string
		d      []byte
		ok     bool
		id, sq uint16
	}{
		{name: "echo", d: pkt, ok: true, id: 0x1234, sq: 9},
		{name: "short", d: pkt[:47]},
		{name: "IPv4", d: append([]byte{0x45}, pkt[1:]...)},
		{name: "not ICMPv6", d: append(append([]byte{}, pkt[:6]...), append([]byte{17}, pkt[7:]...)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, id, sq, ok := quotedEcho6(tt.d)
			if ok != tt.ok || (ok && (got != dst || id != tt.id || sq != tt.sq)) {
				t.Fatalf("quotedEcho6 = %v %x %d %v, want %v %x %d %v", got, id, sq, ok, dst, tt.id, tt.sq, tt.ok)
			}
		})
	}
}
