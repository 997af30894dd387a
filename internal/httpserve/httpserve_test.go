package httpserve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Serve answers on a real loopback listener until its context ends, then
// returns nil with the listener closed; Healthz answers 200 "ok".
func TestServeHealthz(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", Healthz)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}, l, 0, "test", slog.New(slog.DiscardHandler))
	}()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + l.Addr().String() + "/healthz")
	if err != nil {
		cancel()
		t.Fatal(err, <-done)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("GET /healthz = %d %q (%s), want 200 \"ok\\n\" text/plain", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after its context ended = %v, want nil", err)
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Error("the listener still accepts after Serve returned")
	}
}

// A listener that fails makes Serve return at once with an error naming
// what it serves.
func TestServeListenerError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	err = Serve(context.Background(), &http.Server{ReadHeaderTimeout: time.Second}, l, 0, "metrics", slog.New(slog.DiscardHandler))
	if err == nil || !strings.HasPrefix(err.Error(), "metrics: serve ") || !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve on a closed listener = %v, want a metrics: serve error wrapping net.ErrClosed", err)
	}
}
