package probe

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestKernelLag: the SCM_TIMESTAMPNS stamp gives the lag behind now;
// none, a stamp in the future or one older than maxKernelLag gives 0.
func TestKernelLag(t *testing.T) {
	now := time.Now()
	cmsg := func(at time.Time) []byte {
		ts := unix.NsecToTimespec(at.UnixNano())
		b := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(ts))))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS
		h.SetLen(unix.CmsgLen(int(unsafe.Sizeof(ts))))
		*(*unix.Timespec)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = ts
		return b
	}
	for _, tt := range []struct {
		name string
		oob  []byte
		want time.Duration
	}{
		{"none", nil, 0},
		{"70us", cmsg(now.Add(-70 * time.Microsecond)), 70 * time.Microsecond},
		{"future", cmsg(now.Add(time.Millisecond)), 0},
		{"too old", cmsg(now.Add(-time.Second)), 0},
	} {
		if got := kernelLag(tt.oob, now); got != tt.want {
			t.Errorf("%s: kernelLag %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestStripIPv4Header(t *testing.T) {
	icmp := []byte{0, 0, 0xaa, 0xbb}
	pkt := append([]byte{0x45, 0, 0, 24, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}, icmp...)
	if got := stripIPv4Header(pkt); string(got) != string(icmp) {
		t.Errorf("stripIPv4Header(packet) = %x, want %x", got, icmp)
	}
	if got := stripIPv4Header(icmp); string(got) != string(icmp) {
		t.Errorf("stripIPv4Header(no header) = %x, want it unchanged", got)
	}
}
