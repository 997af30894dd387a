package testutil

import (
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ServeGRPC serves a gRPC server (made with opts, its services added by
// register) until the test ends, on a unix socket in a temporary
// directory (network "unix") or on a free loopback TCP port ("tcp"). It
// returns the target to dial ("unix:///path" or "127.0.0.1:port") and the
// server, which the test may stop earlier; the cleanup stops it and waits
// for Serve to return.
func ServeGRPC(t testing.TB, network string, register func(*grpc.Server), opts ...grpc.ServerOption) (string, *grpc.Server) {
	t.Helper()
	var (
		l      net.Listener
		err    error
		target string
	)
	switch network {
	case "unix":
		sock := filepath.Join(t.TempDir(), "grpc.sock")
		l, err = net.Listen("unix", sock)
		target = "unix://" + sock
	case "tcp":
		l, err = net.Listen("tcp", "127.0.0.1:0")
	default:
		t.Fatalf("ServeGRPC: network %q, want unix or tcp", network)
	}
	if err != nil {
		t.Fatal(err)
	}
	if target == "" {
		target = l.Addr().String()
	}
	g := grpc.NewServer(opts...)
	register(g)
	done := make(chan struct{})
	go func() { // owner: the cleanup below, whose Stop ends Serve
		defer close(done)
		_ = g.Serve(l)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return target, g
}

// DialGRPC is a plaintext client connection to target, closed when the
// test ends.
func DialGRPC(t testing.TB, target string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
