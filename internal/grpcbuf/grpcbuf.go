// Package grpcbuf owns the process-wide pool gRPC takes its message
// buffers from (its proto codec takes no other): gRPC's default tiers up
// to 32 kB and, above that, a buffer of the message's own size. gRPC's
// default pool rounds every message over 32 kB up to a 1 MB buffer, and a
// full probe plan of 5,000 peers (some 360 kB), queued for each agent of a
// join wave, then costs 2.8 times its size. Commands call Install from an
// init function; library packages leave their importers' gRPC alone.
package grpcbuf

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// Install makes the pool gRPC's default. Call it at initialization only
// (grpc's experimental.SetDefaultBufferPool is not safe to call later); it
// panics only if gRPC refuses its constant tiers.
func Install() {
	pool, err := mem.NewBinaryTieredBufferPool(8, 12, 14, 15)
	if err != nil {
		panic(fmt.Sprintf("gRPC buffer pool: %v", err))
	}
	experimental.SetDefaultBufferPool(pool)
}

// StreamWindowBytes and ConnWindowBytes are the HTTP/2 flow-control
// windows meshperf's agent connections open: a stream may have 1 MiB in
// flight (a full plan of 5,000 peers or a 1,000-peer report without a
// window round trip) and a connection 4 MiB. Fixed windows also turn off
// gRPC's bandwidth estimation, which answers every data frame received
// with a ping: on 5,000 idle agent connections that doubled the
// coordinator's socket writes for its heartbeats.
const (
	StreamWindowBytes = 1 << 20
	ConnWindowBytes   = 4 << 20
)

// ServerOptions are the coordinator's transport options for agent
// connections: the fixed flow-control windows.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(StreamWindowBytes), grpc.InitialConnWindowSize(ConnWindowBytes)}
}

// DialOptions are an agent's transport options to the coordinator: the
// fixed flow-control windows.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(StreamWindowBytes), grpc.WithInitialConnWindowSize(ConnWindowBytes)}
}
