package cluster

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// signalWriter keeps what is written and signals each write.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (w *signalWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wrote <- struct{}{}
	return w.buf.Write(b)
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestDemoFinish checks the demo's last lines: the verdict, then the web
// UI's address, and that KeepUI waits for the context.
func TestDemoFinish(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ok, total int
		keep      bool
		want      []string
	}{
		{"all ok", 60, 60, false, []string{"60/60 pair-paths OK", "web UI: http://127.0.0.1:7780/ (closed with the lab; make demo UI=1 keeps it up until Ctrl-C)"}},
		{"failed", 58, 60, false, []string{"58/60 pair-paths OK, 2 failed", "web UI: http://127.0.0.1:7780/ (closed with the lab; make demo UI=1 keeps it up until Ctrl-C)"}},
		{"kept", 60, 60, true, []string{"60/60 pair-paths OK", "web UI: http://127.0.0.1:7780/ (up until Ctrl-C)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &signalWriter{wrote: make(chan struct{}, 8)}
			d := &demo{cfg: DemoConfig{Stdout: out, KeepUI: tc.keep}, ok: tc.ok, total: tc.total}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { d.finish(ctx, "127.0.0.1:7780"); close(done) }()
			if tc.keep {
				<-out.wrote // the verdict
				<-out.wrote // the address: a finish that did not wait returns now
				select {
				case <-done:
					t.Fatal("finish returned before the context ended, with KeepUI")
				case <-time.After(100 * time.Millisecond):
				}
			}
			cancel()
			<-done
			if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("finish printed %q, want %q", got, tc.want)
			}
		})
	}
}
