package httptarget

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// serveLimited serves Handler on a loopback listener with the limits
// given, until the test ends; it returns the address.
func serveLimited(t *testing.T, writeTimeout time.Duration, maxConns int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, l, Handler("n", "host"), writeTimeout, maxConns) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

// TestSlowReaderCutOff: a client that asks for 16 MiB (16 pipelined
// requests of 1 MiB) and stops reading is cut off once an answer takes
// longer than the write timeout, instead of holding its handler and
// socket for as long as it likes: what it reads afterwards ends early.
func TestSlowReaderCutOff(t *testing.T) {
	addr := serveLimited(t, 500*time.Millisecond, 16)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	const requests = 16
	if _, err := io.WriteString(c, strings.Repeat("GET /?bytes=1048576 HTTP/1.1\r\nHost: x\r\n\r\n", requests)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // not reading: the socket buffers fill, the server's write blocks
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) || n >= requests<<20 {
		t.Errorf("read %d bytes, then %v: the server kept the connection, want it cut before all %d MiB", n, err, requests)
	}
}

// TestConnectionsBounded: past maxConns open connections, a new one is
// not served until one of them closes.
func TestConnectionsBounded(t *testing.T) {
	addr := serveLimited(t, time.Minute, 2)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		held = append(held, c)
	}
	ask := func(c net.Conn, wait time.Duration) error {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		_, err := bufio.NewReader(c).ReadString('\n')
		return err
	}
	if err := ask(held[0], 10*time.Second); err != nil {
		t.Fatalf("a held connection is not served: %v", err)
	}
	third, err := net.Dial("tcp", addr) // in the backlog: the kernel accepts it
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = third.Close() }()
	if err := ask(third, time.Second); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection past the bound of 2: %v, want no answer", err)
	}
	_ = held[1].Close()
	_ = third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(third).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Errorf("the third connection once one closed: %q, %v; want its answer", line, err)
	}
}
