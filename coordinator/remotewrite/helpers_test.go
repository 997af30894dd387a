package remotewrite

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// gotSeries is one decoded TimeSeries: its labels as name=value pairs
// joined by "," in wire order, and its samples.
type gotSeries struct {
	labels  string
	samples []gotSample
}

// gotSample is one decoded Sample.
type gotSample struct {
	v  float64
	ts int64
}

// decodeWriteRequest decodes a prometheus.WriteRequest, checking that each
// series' labels are sorted by name and unique.
func decodeWriteRequest(b []byte) ([]gotSeries, error) {
	var out []gotSeries
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != fieldWriteRequestTimeseries || typ != protowire.BytesType {
			return fmt.Errorf("WriteRequest field %d type %d", num, typ)
		}
		var s gotSeries
		var names, labels []string
		err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			switch num {
			case fieldTimeSeriesLabels:
				var name, value string
				if err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
					switch num {
					case fieldLabelName:
						name = string(v)
					case fieldLabelValue:
						value = string(v)
					default:
						return fmt.Errorf("Label field %d", num)
					}
					return nil
				}); err != nil {
					return err
				}
				names = append(names, name)
				labels = append(labels, name+"="+value)
			case fieldTimeSeriesSamples:
				var smp gotSample
				if err := fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
					switch {
					case num == fieldSampleValue && typ == protowire.Fixed64Type:
						smp.v = math.Float64frombits(x)
					case num == fieldSampleTimestamp && typ == protowire.VarintType:
						smp.ts = int64(x)
					default:
						return fmt.Errorf("Sample field %d type %d", num, typ)
					}
					return nil
				}); err != nil {
					return err
				}
				s.samples = append(s.samples, smp)
			default:
				return fmt.Errorf("TimeSeries field %d", num)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !sort.StringsAreSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
			return fmt.Errorf("labels not sorted or not unique: %v", names)
		}
		s.labels = strings.Join(labels, ",")
		out = append(out, s)
		return nil
	})
	return out, err
}

// fields calls f with each field of the message b: bytes fields' value,
// fixed64 and varint ones' number.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			return fmt.Errorf("field %d: wire type %d", num, typ)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// receiver is a remote-write receiver on 127.0.0.1 that answers each
// request with the next of its script's status codes (200 once the script
// is done; 0 in the script: the connection is closed without an answer),
// and keeps what the accepted requests carried.
type receiver struct {
	url string

	mu       sync.Mutex
	script   []int
	header   http.Header // of the script's answers (Retry-After)
	requests int         // answered or closed
	series   []gotSeries // accepted, in arrival order
	errs     []error     // bad requests
	auth     []string    // each request's Authorization header
	hold     chan struct{}
}

func newReceiver(t *testing.T, script ...int) *receiver {
	t.Helper()
	r := &receiver{script: script, header: http.Header{}}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/api/v1/write"
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	body, err := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.auth = append(r.auth, req.Header.Get("Authorization"))
	code := http.StatusOK
	if len(r.script) > 0 {
		code, r.script = r.script[0], r.script[1:]
	}
	if code == 0 {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
	}
	for _, h := range []struct{ name, want string }{
		{"Content-Encoding", "snappy"}, {"Content-Type", "application/x-protobuf"}, {"X-Prometheus-Remote-Write-Version", "0.1.0"},
	} {
		if got := req.Header.Get(h.name); got != h.want {
			err = errors.Join(err, fmt.Errorf("%s %q, want %q", h.name, got, h.want))
		}
	}
	if req.URL.Path != "/api/v1/write" {
		err = errors.Join(err, fmt.Errorf("path %q, want the URL's /api/v1/write", req.URL.Path))
	}
	if req.Method != http.MethodPost {
		err = errors.Join(err, fmt.Errorf("method %s", req.Method))
	}
	var got []gotSeries
	if err == nil {
		var raw []byte
		if raw, err = snappy.Decode(nil, body); err == nil {
			got, err = decodeWriteRequest(raw)
		}
	}
	if err != nil {
		r.errs = append(r.errs, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if code/100 == 2 {
		r.series = append(r.series, got...)
	}
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
}

// samples returns what was accepted: per series (labels), its samples in
// arrival order.
func (r *receiver) samples() map[string][]gotSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]gotSample{}
	for _, s := range r.series {
		out[s.labels] = append(out[s.labels], s.samples...)
	}
	return out
}

// check fails t if a request was malformed.
func (r *receiver) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.errs {
		t.Errorf("receiver: bad request: %v", err)
	}
}
