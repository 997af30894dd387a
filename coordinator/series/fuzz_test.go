package series

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// FuzzDecodeChunk: garbage gives an error wrapping ErrCorrupt, never a
// panic; what decodes re-encodes to the same samples.
func FuzzDecodeChunk(f *testing.F) {
	for _, samples := range [][]Sample{nil, {okSample(0, 100)}, realistic(newRand(5), 50)} {
		data, err := EncodeChunk(samples)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeChunk(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			return
		}
		again, err := EncodeChunk(got)
		if err != nil {
			t.Fatalf("decoded samples do not encode: %v", err)
		}
		back, err := DecodeChunk(again)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, back, cmpOpts...); diff != "" {
			t.Errorf("re-encoded (-first +second):\n%s", diff)
		}
	})
}

// FuzzChunkRoundTrip: any valid series comes back as Quantize makes it.
func FuzzChunkRoundTrip(f *testing.F) {
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), int64(t0.UnixNano()))
	f.Add(make([]byte, 200), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, start int64) {
		if start <= 0 || start > 1<<62 {
			return
		}
		samples := samplesFrom(data, time.Unix(0, start))
		chunk, err := EncodeChunk(samples)
		if err != nil {
			t.Fatalf("valid samples refused: %v", err)
		}
		got, err := DecodeChunk(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(quantized(samples), got, cmpOpts...); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	})
}

// samplesFrom makes valid samples out of arbitrary bytes, 16 a sample.
func samplesFrom(data []byte, start time.Time) []Sample {
	var out []Sample
	for ; len(data) >= 16; data = data[16:] {
		u16 := func(i int) uint64 { return uint64(binary.LittleEndian.Uint16(data[i:])) }
		s := Sample{Start: start, Period: time.Duration(1+u16(0)%4096) * time.Millisecond * 10}
		switch data[2] % 4 {
		case 0:
			s.Period = 10 * time.Second
		case 1:
			s.Start = s.Start.Add(time.Duration(u16(3)) * time.Microsecond)
		}
		s.Sent = uint32(data[5] % 16)
		if data[6]%8 == 0 {
			s.Sent = binary.LittleEndian.Uint32(data[5:])
		}
		s.Received = s.Sent - uint32(data[9])%(s.Sent+1)
		if s.Received > 0 {
			rtt := []time.Duration{
				time.Duration(u16(10)) * 37 * time.Nanosecond, time.Duration(u16(12)) * 1000 * time.Nanosecond,
				time.Duration(u16(14)) * 3 * time.Microsecond, time.Duration(data[10]) * time.Millisecond,
			}
			slices.Sort(rtt)
			s.RTTMin, s.RTTMedian, s.RTTP90, s.RTTMax = rtt[0], rtt[1], rtt[2], rtt[3]
		}
		s.Status = measurev1.Status(1 + data[11]%13)
		if s.Status != measurev1.Status_STATUS_OK {
			s.Message = string(data[:data[12]%17])
		}
		out = append(out, s)
		start = s.Start.Add(s.Period)
	}
	return out
}
