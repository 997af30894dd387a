package testspec

import (
	"encoding/binary"
	"errors"
	"math/big"
	"testing"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// FuzzNormalize builds specs from fuzzed numbers: Normalize must not panic,
// must not modify its argument, must return ErrInvalid or a spec whose
// params match its test, and a spec it accepts must normalize again to an
// equal spec, last at most MaxExpectedDuration and, for iperf3 UDP, offer
// at most 100 Gbit/s in all (udp_target_bps x parallel_streams); an
// http_load has requests, concurrency and timeout in their ranges.
func FuzzNormalize(f *testing.F) {
	f.Add(int32(1), uint8(0), uint64(5), uint64(56), int64(0), int32(200000000), []byte{})
	f.Add(int32(2), uint8(1), uint64(0), uint64(0), int64(1), int32(0), []byte{1, 0, 0, 0, 0, 0, 0, 0})
	f.Add(int32(3), uint8(1), uint64(0), uint64(0), int64(0), int32(500000000), []byte{})
	f.Add(int32(5), uint8(1), uint64(0), uint64(0), int64(2), int32(0), []byte{0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0})
	f.Add(int32(6), uint8(2), uint64(2), uint64(1<<20), int64(10), int32(0), []byte{})
	f.Add(int32(7), uint8(2), uint64(1), uint64(1400), int64(1), int32(0), []byte{0xff})
	f.Add(int32(8), uint8(3), uint64(0), uint64(0), int64(0), int32(100000000), []byte{})
	f.Add(int32(8), uint8(0), uint64(0), uint64(0), int64(-1), int32(-5), []byte{})
	f.Add(int32(9), uint8(4), uint64(90000), uint64(50), int64(30), int32(0), []byte{1})
	f.Add(int32(9), uint8(4), uint64(5), uint64(0), int64(0), int32(0), []byte{})
	f.Add(int32(9), uint8(4), uint64(10), uint64(11), int64(1), int32(500000000), []byte{})
	f.Add(int32(9), uint8(3), uint64(0), uint64(0), int64(0), int32(0), []byte{})
	f.Add(int32(99), uint8(4), uint64(0), uint64(0), int64(0), int32(0), []byte{})
	var sizes32 []byte
	for i := range 32 {
		sizes32 = binary.LittleEndian.AppendUint64(sizes32, uint64(i+1))
	}
	f.Add(int32(3), uint8(1), uint64(0), uint64(0), int64(300), int32(0), sizes32)
	f.Add(int32(7), uint8(2), uint64(128), uint64(1<<30), int64(2), int32(0), []byte{})
	f.Fuzz(func(t *testing.T, test int32, kind uint8, a, b uint64, secs int64, nanos int32, sizes []byte) {
		var d *durationpb.Duration
		if secs != 0 || nanos != 0 {
			d = &durationpb.Duration{Seconds: secs, Nanos: nanos}
		}
		spec := &measurev1.TestSpec{Test: measurev1.Test(test)}
		switch kind % 6 {
		case 0:
			spec.Params = &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: uint32(a), Interval: d, PayloadSizeBytes: uint32(b)}}
		case 1:
			q := &measurev1.QperfParams{Duration: d}
			for len(sizes) >= 8 {
				q.MsgSizeBytes = append(q.MsgSizeBytes, binary.LittleEndian.Uint64(sizes)%(1<<31))
				sizes = sizes[8:]
			}
			spec.Params = &measurev1.TestSpec_Qperf{Qperf: q}
		case 2:
			spec.Params = &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{
				Duration: d, ParallelStreams: uint32(a), BlockSizeBytes: b, UdpTargetBps: a * b,
			}}
		case 3:
			spec.Params = &measurev1.TestSpec_Http{Http: &measurev1.HttpParams{Timeout: d}}
		case 4:
			spec.Params = &measurev1.TestSpec_HttpLoad{HttpLoad: &measurev1.HttpLoadParams{
				Requests: uint32(a), Concurrency: uint32(b), KeepAlive: len(sizes) > 0, Timeout: d,
			}}
		}
		before := proto.Clone(spec)
		got, err := Normalize(spec)
		if !proto.Equal(before, spec) {
			t.Fatalf("Normalize modified its argument")
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if Tool(got.GetTest()) == measurev1.Tool_TOOL_UNSPECIFIED || got.Params == nil {
			t.Fatalf("accepted %v", got)
		}
		again, err := Normalize(got)
		if err != nil {
			t.Fatalf("second Normalize(%v): %v", got, err)
		}
		if !proto.Equal(again, got) {
			t.Fatalf("second Normalize changed %v into %v", got, again)
		}
		lasts, err := ExpectedDuration(got)
		if err != nil {
			t.Fatalf("ExpectedDuration(%v): %v", got, err)
		}
		if lasts <= 0 || lasts > MaxExpectedDuration {
			t.Fatalf("accepted %v, which lasts %v", got, lasts)
		}
		if p := got.GetHttpLoad(); p != nil {
			if p.GetRequests() < 1 || p.GetRequests() > 1_000_000 || p.GetConcurrency() < 1 || p.GetConcurrency() > 1000 ||
				p.GetConcurrency() > p.GetRequests() || p.GetTimeout().AsDuration()%time.Second != 0 {
				t.Fatalf("accepted http_load %v", p)
			}
		}
		if p := got.GetIperf3(); got.GetTest() == measurev1.Test_TEST_IPERF3_UDP {
			if load := new(big.Int).Mul(new(big.Int).SetUint64(p.GetUdpTargetBps()), big.NewInt(int64(p.GetParallelStreams()))); load.Cmp(big.NewInt(100e9)) > 0 {
				t.Fatalf("accepted %v, which offers %v bit/s", got, load)
			}
		}
	})
}
