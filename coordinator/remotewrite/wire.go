package remotewrite

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of remote write 1.0's prometheus.WriteRequest and the
// types it holds (prometheus prompb/types.proto, remote.proto).
const (
	fieldWriteRequestTimeseries = 1 // WriteRequest.timeseries: repeated TimeSeries
	fieldTimeSeriesLabels       = 1 // TimeSeries.labels: repeated Label
	fieldTimeSeriesSamples      = 2 // TimeSeries.samples: repeated Sample
	fieldLabelName              = 1 // Label.name: string
	fieldLabelValue             = 2 // Label.value: string
	fieldSampleValue            = 1 // Sample.value: double
	fieldSampleTimestamp        = 2 // Sample.timestamp: int64, Unix milliseconds
)

// writeRequest is an encoded prometheus.WriteRequest. Its Size and
// MarshalToSizedBuffer methods are the ones remote.API.Write uses for
// messages it does not know.
type writeRequest []byte

// Size is the encoded length in bytes.
func (w writeRequest) Size() int { return len(w) }

// MarshalToSizedBuffer copies the message into dst, which must be Size
// bytes long.
func (w writeRequest) MarshalToSizedBuffer(dst []byte) (int, error) {
	if len(dst) != len(w) {
		return 0, fmt.Errorf("write request of %d bytes into a buffer of %d", len(w), len(dst))
	}
	return copy(dst, w), nil
}

// label is one name and value of a series.
type label struct{ name, value string }

// encoder turns batches of samples into WriteRequests; its buffers are
// reused from one batch to the next (one sender: not safe for concurrent
// use).
type encoder struct {
	order  map[seriesKey]int // series' index in series
	series []seriesSamples
	labels []label
	ts     []byte // one TimeSeries
	inner  []byte // one Label or Sample
	out    []byte
}

// seriesSamples are the indexes in the batch of one series' samples, in
// queue order.
type seriesSamples struct {
	key     seriesKey
	samples []int
}

// encode returns the WriteRequest of batch, one TimeSeries per series with
// its samples in queue order, labels sorted by name. The result is valid
// until the next call.
func (e *encoder) encode(batch []sample, names []string) writeRequest {
	if e.order == nil {
		e.order = map[seriesKey]int{}
	}
	clear(e.order)
	e.series = e.series[:0]
	for i, s := range batch {
		k := s.key()
		j, ok := e.order[k]
		if !ok {
			j = len(e.series)
			e.order[k] = j
			if j < cap(e.series) {
				e.series = e.series[:j+1]
				e.series[j].key, e.series[j].samples = k, e.series[j].samples[:0]
			} else {
				e.series = append(e.series, seriesSamples{key: k})
			}
		}
		e.series[j].samples = append(e.series[j].samples, i)
	}
	e.out = e.out[:0]
	for _, ss := range e.series {
		e.ts = e.ts[:0]
		for _, l := range e.labelsOf(ss.key, names) {
			e.inner = protowire.AppendTag(e.inner[:0], fieldLabelName, protowire.BytesType)
			e.inner = protowire.AppendString(e.inner, l.name)
			e.inner = protowire.AppendTag(e.inner, fieldLabelValue, protowire.BytesType)
			e.inner = protowire.AppendString(e.inner, l.value)
			e.ts = protowire.AppendTag(e.ts, fieldTimeSeriesLabels, protowire.BytesType)
			e.ts = protowire.AppendBytes(e.ts, e.inner)
		}
		for _, i := range ss.samples {
			e.inner = protowire.AppendTag(e.inner[:0], fieldSampleValue, protowire.Fixed64Type)
			e.inner = protowire.AppendFixed64(e.inner, math.Float64bits(batch[i].v))
			e.inner = protowire.AppendTag(e.inner, fieldSampleTimestamp, protowire.VarintType)
			e.inner = protowire.AppendVarint(e.inner, uint64(batch[i].ts))
			e.ts = protowire.AppendTag(e.ts, fieldTimeSeriesSamples, protowire.BytesType)
			e.ts = protowire.AppendBytes(e.ts, e.inner)
		}
		e.out = protowire.AppendTag(e.out, fieldWriteRequestTimeseries, protowire.BytesType)
		e.out = protowire.AppendBytes(e.out, e.ts)
	}
	return writeRequest(e.out)
}

// labelsOf returns k's labels sorted by name, __name__ first; the slice
// is reused.
func (e *encoder) labelsOf(k seriesKey, names []string) []label {
	f := families[k.fam]
	e.labels = append(e.labels[:0], label{"__name__", f.name}, label{f.a, names[k.a]}, label{f.b, names[k.b]})
	if f.testPath {
		e.labels = append(e.labels, label{"test", names[k.test]}, label{"path", names[k.path]})
	}
	if k.quantile != quantileNone {
		e.labels = append(e.labels, label{"quantile", quantileNames[k.quantile]})
	}
	slices.SortFunc(e.labels, func(x, y label) int { return strings.Compare(x.name, y.name) })
	return e.labels
}
