//go:build capture

package runner

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
)

// captureAbEnv names the directory TestCaptureAb writes its captures to
// (testdata/ab to refresh them; then go test -run TestGolden -update).
const captureAbEnv = "MESHPERF_CAPTURE_AB"

// abCaptureHandler serves the behaviours the ab captures provoke, on
// 127.0.0.1: / a fixed body as agent/httptarget answers, /500 a 500,
// /half a 200 and a 503 of another length in turn, /vary a 200 body of 0,
// 1 or 2 bytes in turn, /slow every answer after 3 s, /someslow every
// 10th answer after 3 s.
func abCaptureHandler() http.Handler {
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprint(w, "meshperf agent node-b host\n") })
	mux.HandleFunc("/500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	mux.HandleFunc("/half", func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%2 == 0 {
			http.Error(w, "boom", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprint(w, "ok\n")
	})
	mux.HandleFunc("/vary", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, strings.Repeat("x", int(n.Add(1)%3)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(3 * time.Second)
		_, _ = fmt.Fprint(w, "late\n")
	})
	mux.HandleFunc("/someslow", func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%10 == 0 {
			time.Sleep(3 * time.Second)
		}
		_, _ = fmt.Fprint(w, "ok\n")
	})
	return mux
}

// TestCaptureAb re-captures the real ab cases of testdata/ab with the
// runner's argv (abCommand) against abCaptureHandler and a closed port on
// 127.0.0.1, into the directory $MESHPERF_CAPTURE_AB. It is built only
// with the capture build tag (testdata/README.md says how to run it);
// without the directory it fails.
func TestCaptureAb(t *testing.T) {
	dir := os.Getenv(captureAbEnv)
	if dir == "" {
		t.Fatal("re-captures testdata/ab: set " + captureAbEnv + "=DIR")
	}
	testnet.Need(t, "ab")
	srv := httptest.NewServer(abCaptureHandler())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	p := func(requests, concurrency uint32, keepAlive bool, timeout time.Duration) *measurev1.HttpLoadParams {
		return &measurev1.HttpLoadParams{Requests: requests, Concurrency: concurrency, KeepAlive: keepAlive, Timeout: durationpb.New(timeout)}
	}
	cases := []struct {
		name, path, note string
		port             int
		params           *measurev1.HttpLoadParams
	}{
		{"ok", "/", "a Go net/http server on 127.0.0.1 answering a fixed 27-byte body, as agent/httptarget does", port, p(2000, 10, false, 30*time.Second)},
		{"ok_keepalive", "/", "the same server with -k: HTTP/1.0 keep-alive, every request on a kept connection", port, p(2000, 10, true, 30*time.Second)},
		{"single", "/", "one request: ab prints no percentile table (only from 2 requests on)", port, p(1, 1, false, 30*time.Second)},
		{"non2xx_500", "/500", "a server answering 500 to every request: ab's Failed requests says 0, Non-2xx responses 500", port, p(500, 10, false, 30*time.Second)},
		{"non2xx_half", "/half", "every other answer is a 503 of another length: the same requests count as Length failures and as Non-2xx", port, p(500, 10, false, 30*time.Second)},
		{"length_mismatch", "/vary", "a 200 body of 0, 1 or 2 bytes in turn (dynamic content): Length failures against the first answer's length", port, p(500, 10, false, 30*time.Second)},
		{"refused", "/", "nothing listens on the port: with -r ab counts every refusal as a Receive failure (and more as Exceptions) and prints its summary", closed, p(100, 5, false, 30*time.Second)},
		{"timeout", "/slow", "every answer takes 3 s, -s 1: ab aborts on its socket timeout without a summary", port, p(20, 2, false, time.Second)},
		{"time_limit", "/", "1,000,000 requests asked, -t 1 stops ab after 1 s: Complete requests is what it did", port, p(1_000_000, 50, true, time.Second)},
		{"some_slow", "/someslow", "every 10th answer takes 3 s; -s 2 aborts ab before it completes all 200", port, p(200, 5, false, 2*time.Second)},
	}
	for _, c := range cases {
		spec := loadSpec(t, c.params)
		cmd := abCommand(spec, "127.0.0.1", uint32(c.port), "")
		cmd.Args[len(cmd.Args)-1] = strings.TrimSuffix(cmd.Args[len(cmd.Args)-1], "/") + c.path
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := proc.Run(ctx, cmd)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		specJSON, err := protojson.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		stdout := string(out.Stdout)
		if stdout != "" && !strings.HasSuffix(stdout, "\n") {
			stdout += "\n" // the stderr marker starts a line
			c.note = "stdout ended without a newline: one is added before the stderr marker. " + c.note
		}
		var b strings.Builder
		fmt.Fprintf(&b, "argv: %s\nexit: %d\nspec: %s\nnote: %s\n%s%s%s%s", cmd.String(), out.ExitCode,
			strings.Join(strings.Fields(string(specJSON)), ""), c.note, stdoutMarker, stdout, stderrMarker, out.Stderr)
		if err := os.WriteFile(filepath.Join(dir, c.name+".txt"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: exit %d", c.name, out.ExitCode)
	}
}
