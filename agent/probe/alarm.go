package probe

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// alarm is the prober loop's clock and doorbell: a timerfd, armed for
// the loop's next step, that the loop waits on in the runtime's poller.
// Other goroutines ring it (a plan came, a result must not wait, Run's
// context ended).
//
// Not a time.Timer: a goroutine woken by a runtime timer is made ready
// by the thread that ran the timer, which then wakes a second, spinning
// thread to look for work; resetting the timer before each wait breaks
// the poller's sleep (an eventfd write and a thread woken) whenever the
// new deadline is earlier; and the runtime's sysmon thread sleeps only
// until the next runtime timer. At 200 probe starts a second, each with
// its own due time, that was most of the prober's own CPU. A goroutine
// woken by the poller runs on the thread that polled, and nothing else
// wakes.
type alarm struct {
	f    *os.File
	fd   int
	rc   syscall.RawConn
	rung atomic.Bool // ring was called since the last wait
	buf  [8]byte     // wait's (the expiry count read)
	read func(fd uintptr) bool
}

// newAlarm opens the timerfd (CLOCK_MONOTONIC, non-blocking).
func newAlarm() (*alarm, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "probe-alarm")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	a := &alarm{f: f, fd: fd, rc: rc}
	a.read = func(fd uintptr) bool {
		_, err := rawRead(int(fd), a.buf[:])
		return !errors.Is(err, unix.EAGAIN)
	}
	return a, nil
}

// set arms the alarm to go off in d (at least 1 ns: 0 would disarm it),
// replacing the previous setting.
func (a *alarm) set(d time.Duration) {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	_, _, _ = unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(a.fd), 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
}

// ring makes the alarm go off now; any goroutine may call it.
func (a *alarm) ring() {
	a.rung.Store(true)
	a.set(1)
}

// wait returns once the alarm has gone off or rung since the last wait
// (at once if ring was called after the last set), or with an error once
// the alarm is closed.
func (a *alarm) wait() error {
	if a.rung.Swap(false) {
		a.drain()
		return nil
	}
	err := a.rc.Read(a.read) // one closure for every wait: no allocation
	a.rung.Store(false)
	return err
}

// drain clears an expiry not waited for.
func (a *alarm) drain() {
	_, _ = rawRead(a.fd, a.buf[:])
}

// close closes the timerfd; a wait returns.
func (a *alarm) close() { _ = a.f.Close() }
