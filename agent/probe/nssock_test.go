package probe

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/internal/testnet"
)

// TestNSSockets: every socket taken, across refills, was made inside the
// namespace; after close, take fails.
func TestNSSockets(t *testing.T) {
	path := testnet.NewNetNS(t, "mp-stock")
	var want syscall.Stat_t
	if err := syscall.Stat(path, &want); err != nil {
		t.Fatal(err)
	}
	s := newNSSockets(path)
	defer s.close()
	for _, tt := range []struct {
		name   string
		family int
		n      int
	}{
		{"IPv4, past two refills", unix.AF_INET, 2*nsBatch + 1},
		{"IPv6", unix.AF_INET6, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.n {
				fd, err := s.take(tt.family)
				if err != nil {
					t.Fatalf("take %d: %v", i, err)
				}
				nsfd, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
				rawClose(fd)
				if err != nil {
					t.Fatalf("SIOCGSKNS: %v", err)
				}
				var got unix.Stat_t
				err = unix.Fstat(nsfd, &got)
				_ = unix.Close(nsfd)
				if err != nil {
					t.Fatal(err)
				}
				if got.Dev != want.Dev || got.Ino != want.Ino {
					t.Fatalf("socket %d is in namespace %d:%d, want %s (%d:%d)", i, got.Dev, got.Ino, path, want.Dev, want.Ino)
				}
			}
		})
	}
	s.close()
	if _, err := s.take(unix.AF_INET); err == nil {
		t.Error("take after close succeeded")
	}
}
