package httptarget_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/agent/httptarget"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
)

// TestMain fails the package if a server or connection goroutine outlives
// the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHandler(t *testing.T) {
	h := httptarget.Handler("node-7", "pod")
	tests := []struct {
		name       string
		method     string
		target     string
		wantCode   int
		wantBody   string // exact, unless wantLen >= 0
		wantLen    int    // -1: check wantBody
		wantIn     string // in the body
		wantHeader map[string]string
	}{
		{name: "GET /", method: "GET", target: "/", wantCode: 200, wantBody: "meshperf agent node-7 pod\n", wantLen: -1,
			wantHeader: map[string]string{"Content-Type": "text/plain"}},
		{name: "any path", method: "GET", target: "/healthz", wantCode: 200, wantBody: "meshperf agent node-7 pod\n", wantLen: -1},
		// The recorder keeps the body that a real server drops for HEAD.
		{name: "HEAD", method: "HEAD", target: "/", wantCode: 200, wantBody: "meshperf agent node-7 pod\n", wantLen: -1},
		{name: "bytes=0", method: "GET", target: "/?bytes=0", wantCode: 200, wantLen: 0, wantHeader: map[string]string{"Content-Length": "0"}},
		{name: "bytes=1", method: "GET", target: "/?bytes=1", wantCode: 200, wantLen: 1, wantHeader: map[string]string{"Content-Length": "1"}},
		{name: "bytes=100000", method: "GET", target: "/?bytes=100000", wantCode: 200, wantLen: 100000},
		// The cap is 1 MiB, whatever the constant says: anyone who reaches
		// the agent may ask.
		{name: "bytes=1MiB", method: "GET", target: "/?bytes=1048576", wantCode: 200, wantLen: 1 << 20},
		{name: "bytes=1MiB+1", method: "GET", target: "/?bytes=1048577", wantCode: 400, wantLen: -1, wantIn: "1048577"},
		{name: "bytes=64MiB", method: "GET", target: "/?bytes=67108864", wantCode: 400, wantLen: -1, wantIn: "67108864"},
		{name: "bytes=max", method: "GET", target: "/?bytes=" + strconv.Itoa(httptarget.MaxBodyBytes), wantCode: 200, wantLen: httptarget.MaxBodyBytes},
		{name: "bytes above max", method: "GET", target: "/?bytes=" + strconv.Itoa(httptarget.MaxBodyBytes+1), wantCode: 400, wantLen: -1,
			wantIn: strconv.Itoa(httptarget.MaxBodyBytes + 1)},
		{name: "negative bytes", method: "GET", target: "/?bytes=-5", wantCode: 400, wantLen: -1, wantIn: `"-5"`},
		{name: "bytes not a number", method: "GET", target: "/?bytes=lots", wantCode: 400, wantLen: -1, wantIn: `"lots"`},
		{name: "bytes with a unit", method: "GET", target: "/?bytes=1k", wantCode: 400, wantLen: -1, wantIn: `"1k"`},
		{name: "POST", method: "POST", target: "/", wantCode: 405, wantLen: -1, wantHeader: map[string]string{"Allow": "GET, HEAD"}},
		{name: "PUT with bytes", method: "PUT", target: "/?bytes=10", wantCode: 405, wantLen: -1, wantHeader: map[string]string{"Allow": "GET, HEAD"}},
		{name: "DELETE", method: "DELETE", target: "/", wantCode: 405, wantLen: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{header: http.Header{}}
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
			rec.WriteHeader(http.StatusOK) // what a server sends if the handler wrote nothing
			if rec.code != tt.wantCode {
				t.Errorf("status %d, want %d (body %.200q)", rec.code, tt.wantCode, rec.body.String())
			}
			body := rec.body.Bytes()
			switch {
			case tt.wantLen >= 0:
				if rec.n != tt.wantLen {
					t.Errorf("body is %d bytes, want %d", rec.n, tt.wantLen)
				}
				if rec.nonZero {
					t.Error("body is not all zero bytes")
				}
			case tt.wantCode == 200 && string(body) != tt.wantBody:
				t.Errorf("body %q, want %q", body, tt.wantBody)
			}
			if !strings.Contains(string(body), tt.wantIn) {
				t.Errorf("body %q does not contain %q", body, tt.wantIn)
			}
			for k, v := range tt.wantHeader {
				if got := rec.header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// recorder is an http.ResponseWriter that keeps the status, the headers
// and the first 64 KiB of the body, and counts the rest.
type recorder struct {
	header  http.Header
	code    int
	body    bytes.Buffer
	n       int
	nonZero bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if room := 64<<10 - r.body.Len(); room > 0 {
		r.body.Write(b[:min(room, len(b))])
	}
	r.n += len(b)
	r.nonZero = r.nonZero || bytes.Count(b, []byte{0}) != len(b)
	return len(b), nil
}

// serve runs Serve on a fresh loopback listener; stop cancels it and
// returns Serve's error.
func serve(t *testing.T, h http.Handler) (addr string, stop func() error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testnet.Ctx(t, time.Minute))
	errc := make(chan error, 1)
	go func() { errc <- httptarget.Serve(ctx, l, h) }()
	var once atomic.Bool
	var serveErr error
	stop = func() error {
		if once.CompareAndSwap(false, true) {
			cancel()
			serveErr = <-errc
		}
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	return l.Addr().String(), stop
}

func TestServe(t *testing.T) {
	addr, stop := serve(t, httptarget.Handler("node-1", "host"))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	tests := []struct {
		method   string
		target   string
		wantCode int
		wantLen  int64
	}{
		{"GET", "/", 200, int64(len("meshperf agent node-1 host\n"))},
		{"GET", "/?bytes=1048576", 200, 1 << 20},
		{"GET", "/?bytes=x", 400, -1},
		{"GET", "/?bytes=1048577", 400, -1},
		{"GET", "/?bytes=67108864", 400, -1},
		{"HEAD", "/?bytes=1048576", 200, -1},
		{"POST", "/", 405, -1},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testnet.Ctx(t, time.Minute), tt.method, "http://"+addr+tt.target, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if tt.wantLen >= 0 && (n != tt.wantLen || resp.ContentLength != tt.wantLen) {
				t.Errorf("read %d bytes, Content-Length %d; want %d", n, resp.ContentLength, tt.wantLen)
			}
			if tt.method == "HEAD" && n != 0 {
				t.Errorf("HEAD returned a %d-byte body", n)
			}
		})
	}
	tr.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	if _, err := client.Get("http://" + addr + "/"); err == nil {
		t.Error("the target still answers after Serve returned")
	}
}

func TestServeListenerError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	err = httptarget.Serve(testnet.Ctx(t, time.Minute), l, httptarget.Handler("n", "host"))
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("Serve on a closed listener = %v, want an error naming %s", err, addr)
	}
}

// TestServeAbortsStuckRequests: a request whose client stopped reading is
// not waited for beyond the shutdown grace period: its connection is cut
// and its handler ends.
func TestServeAbortsStuckRequests(t *testing.T) {
	var inFlight atomic.Int32
	// MaxBodyBytes may fit in the socket buffers: this handler writes
	// until the connection is cut, more than any buffer holds.
	zeros := make([]byte, 32<<10)
	addr, stop := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	// Ask, then never read.
	if _, err := fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, 10*time.Millisecond, "the request to reach the handler", func() bool { return inFlight.Load() == 1 })
	if err := stop(); err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	testutil.Eventually(t, 15*time.Second, 10*time.Millisecond, "the stuck handler to end", func() bool { return inFlight.Load() == 0 })

	// The connection was cut: reading it ends before the whole body.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return // cut before the headers were read: fine
	}
	defer func() { _ = resp.Body.Close() }()
	n, err := io.Copy(io.Discard, resp.Body)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open after Serve returned (%d bytes read)", n)
	}
	if err == nil {
		t.Errorf("the body ended cleanly after %d bytes; want the connection cut", n)
	}
}
