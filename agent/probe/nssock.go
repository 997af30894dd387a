package probe

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/agent/netns"
)

// nsBatch is how many TCP sockets nsSockets makes per visit to the
// namespace.
const nsBatch = 16

// nsSockets hands out TCP sockets created inside a network namespace,
// made nsBatch at a time: one netns.Do (LockOSThread, two opens, two
// setns, two closes, a few hundred microseconds on a busy machine) for
// every nsBatch probes, not for each. A socket keeps the namespace it
// was created in, and an unbound, unconnected one holds nothing but a
// descriptor; at most nsBatch-1 per family wait, until close. Safe for
// concurrent use (the loop's TCP probes, the HTTP probes' dials).
type nsSockets struct {
	ns string

	mu     sync.Mutex
	closed bool
	stock  [2][]int // non-blocking, close-on-exec TCP sockets: [0] AF_INET, [1] AF_INET6
}

// newNSSockets returns an empty stock for the namespace at path.
func newNSSockets(path string) *nsSockets { return &nsSockets{ns: path} }

// take returns a TCP socket of family (AF_INET or AF_INET6) made inside
// the namespace; the caller owns it.
func (s *nsSockets) take(family int) (int, error) {
	i := 0
	if family == unix.AF_INET6 {
		i = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return -1, errors.New("the prober stopped")
	}
	if len(s.stock[i]) == 0 {
		err := netns.Do(s.ns, func() error {
			for range nsBatch {
				fd, err := rawSocket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
				if err != nil {
					if len(s.stock[i]) > 0 {
						return nil // fewer this time
					}
					return err
				}
				s.stock[i] = append(s.stock[i], fd)
			}
			return nil
		})
		if err != nil {
			return -1, err
		}
	}
	n := len(s.stock[i]) - 1
	fd := s.stock[i][n]
	s.stock[i] = s.stock[i][:n]
	return fd, nil
}

// close closes the sockets in stock; take fails from then on.
func (s *nsSockets) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for i, fds := range s.stock {
		for _, fd := range fds {
			rawClose(fd)
		}
		s.stock[i] = nil
	}
}

// newSocket returns a non-blocking, close-on-exec TCP socket of family
// in d's namespace: from d.stock if it has one, else made inside it with
// netns.Do around socket(2) alone.
func (d dialer) newSocket(family int) (int, error) {
	switch {
	case d.ns == "":
		return rawSocket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	case d.stock != nil:
		return d.stock.take(family)
	}
	fd := -1
	err := netns.Do(d.ns, func() error {
		var err error
		fd, err = rawSocket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		return err
	})
	return fd, err
}
