// Package netns opens sockets inside another network namespace: a pod's
// (/proc/PID/ns/net in a cluster, /run/netns/NAME in the lab). A socket keeps
// the namespace it was created in, so the agent can serve in a pod's network
// from its own process without running anything inside the pod. It also
// tells namespaces apart (ID): the agent's endpoint server, the lab's
// Down and the tests' process walkers find a process's namespace by it.
package netns

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Listen opens a listener like net.Listen, inside the network namespace at
// path; an empty path means the caller's own namespace. The calling
// goroutine's OS thread enters the namespace for the duration of the call
// only. Errors name the path: it does not exist, is not a network
// namespace, or the process lacks CAP_SYS_ADMIN.
func Listen(path, network, address string) (net.Listener, error) {
	if path == "" {
		return net.Listen(network, address)
	}
	var l net.Listener
	err := Do(path, func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s %s in netns %s: %w", network, address, path, err)
	}
	return l, nil
}

// Do runs fn on an OS thread that is inside the network namespace at path,
// then moves the thread back. fn must not start goroutines that expect to be
// in the namespace: only fn's own thread is. If the thread cannot move back,
// it is left locked so the runtime discards it when the goroutine ends.
func Do(path string, fn func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer func() { _ = target.Close() }()

	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open own netns: %w", err)
	}
	defer func() { _ = self.Close() }()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns %s: %w", path, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// Stay locked: this thread dies with the goroutine instead of
		// running other goroutines in the wrong namespace.
		return fmt.Errorf("leave netns %s: %w", path, err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// ID identifies a namespace: the device and inode of its nsfs file (a
// /proc/PID/ns/net entry, or a bind mount of one such as
// /run/netns/NAME). Two files of one namespace have equal IDs.
type ID struct {
	// Dev is the file's device number.
	Dev uint64
	// Ino is the file's inode number.
	Ino uint64
}

// IDOf returns the ID of the namespace file at path; the error is stat's
// (no such file: the process or the namespace is gone).
func IDOf(path string) (ID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ID{}, err
	}
	return ID{Dev: st.Dev, Ino: st.Ino}, nil
}
