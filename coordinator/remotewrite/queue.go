package remotewrite

import (
	"slices"
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// family is a metric name with the names of its two node-ish labels.
type family uint8

const (
	famPairLatency family = iota
	famPairThroughput
	famPairLoss
	famNodeLatency
	famNodeThroughput
	famFault
	famExternalFault
	numFamilies
)

// families gives each family its name, the label names of sample.a and
// sample.b, and whether it has the test and path labels.
var families = [numFamilies]struct {
	name, a, b string
	testPath   bool
}{
	famPairLatency:    {metrics.PairLatency, "src", "dst", true},
	famPairThroughput: {metrics.PairThroughput, "src", "dst", true},
	famPairLoss:       {metrics.PairLoss, "src", "dst", true},
	famNodeLatency:    {metrics.NodeLatency, "node", "role", true},
	famNodeThroughput: {metrics.NodeThroughput, "node", "role", true},
	famFault:          {metrics.Fault, "node", "kind", false},
	famExternalFault:  {metrics.ExternalFault, "target", "kind", false},
}

// quantile values of sample.quantile (0: no quantile label).
const (
	quantileNone uint8 = iota
	quantileMedian
	quantileP90
)

// quantileNames are the quantile label's values.
var quantileNames = [...]string{quantileMedian: "0.5", quantileP90: "0.9"}

// sample is one queued sample: 32 bytes, its label values interned.
type sample struct {
	ts         int64   // Unix milliseconds
	v          float64 // the figure, in the family's unit
	a, b       uint32  // names index: src and dst, or node and role
	test, path uint16  // names index (test and path names come first)
	fam        family
	quantile   uint8
}

// seriesKey identifies a sample's series.
type seriesKey struct {
	a, b       uint32
	test, path uint16
	fam        family
	quantile   uint8
}

func (s sample) key() seriesKey {
	return seriesKey{a: s.a, b: s.b, test: s.test, path: s.path, fam: s.fam, quantile: s.quantile}
}

// chunkLen is how many samples a queue chunk holds (128 KiB).
const chunkLen = 4096

// queue is the bounded FIFO of samples and the intern table of their label
// values. Its memory is O(queued samples + distinct names).
type queue struct {
	capacity int

	mu      sync.Mutex
	names   []string          // by index; append only
	index   map[string]uint32 // names' inverse
	chunks  [][]sample        // FIFO: chunks[0][head:] first; each of cap chunkLen
	head    int
	n       int       // samples queued
	firstAt time.Time // when the oldest sample not yet waited for came
	spare   []sample  // one emptied chunk kept for reuse
	ready   chan struct{}
}

// newQueue returns a queue whose intern table starts with "" (index 0)
// and every test, probe kind and path name (labelNames), so that those
// have 16-bit indexes however many node names come after them.
func newQueue(capacity int) *queue {
	q := &queue{capacity: capacity, index: map[string]uint32{}, ready: make(chan struct{}, 1)}
	q.intern("")
	for _, name := range labelNames() {
		q.intern(name)
	}
	return q
}

// labelNames are the test and path label values: the tests' names, the
// probe kinds' ("probe_" and the kind's name) and the paths'.
func labelNames() []string {
	var out []string
	for v := range measurev1.Test_name {
		out = append(out, testspec.Name(measurev1.Test(v)))
	}
	for v := range measurev1.ProbeKind_name {
		out = append(out, testspec.ProbeTestName(measurev1.ProbeKind(v)))
	}
	for v := range measurev1.Path_name {
		out = append(out, testspec.PathName(measurev1.Path(v)))
	}
	slices.Sort(out)
	return out
}

// intern returns name's index. Caller holds q.mu.
func (q *queue) intern(name string) uint32 {
	if i, ok := q.index[name]; ok {
		return i
	}
	i := uint32(len(q.names))
	q.names = append(q.names, name)
	q.index[name] = i
	return i
}

// intern16 is intern for test and path names, which newQueue interned
// first; a name past the 65,536th (none of those) is "" (index 0).
func (q *queue) intern16(name string) uint16 {
	i := q.intern(name)
	if i > 0xffff {
		return 0
	}
	return uint16(i)
}

// push appends s, dropping the oldest sample when the queue is full, and
// reports whether it dropped one. Caller holds q.mu.
func (q *queue) push(s sample, now time.Time) (dropped bool) {
	if q.capacity <= 0 {
		return true
	}
	if q.n >= q.capacity {
		q.popFront()
		dropped = true
	}
	if q.n == 0 {
		q.firstAt = now
	}
	last := len(q.chunks) - 1
	if last < 0 || len(q.chunks[last]) == chunkLen {
		c := q.spare
		q.spare = nil
		if c == nil {
			c = make([]sample, 0, chunkLen)
		}
		q.chunks = append(q.chunks, c[:0])
		last++
	}
	q.chunks[last] = append(q.chunks[last], s)
	q.n++
	return dropped
}

// popFront removes the oldest sample. Caller holds q.mu; q.n > 0.
func (q *queue) popFront() {
	q.head++
	q.n--
	if q.head == len(q.chunks[0]) {
		q.releaseHead()
	}
}

// releaseHead removes the emptied first chunk. Caller holds q.mu.
func (q *queue) releaseHead() {
	if q.spare == nil {
		q.spare = q.chunks[0][:0]
	}
	q.chunks[0] = nil
	q.chunks = q.chunks[1:]
	q.head = 0
	if len(q.chunks) == 0 {
		q.chunks = nil
	}
}

// signal wakes the sender. Caller holds q.mu or not.
func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take moves up to max of the oldest samples into dst and returns it with
// the names table they index. Caller holds q.mu.
func (q *queue) take(dst []sample, limit int, now time.Time) ([]sample, []string) {
	for q.n > 0 && len(dst) < limit {
		c := q.chunks[0][q.head:]
		k := min(len(c), limit-len(dst))
		dst = append(dst, c[:k]...)
		q.head += k
		q.n -= k
		if q.head == len(q.chunks[0]) {
			q.releaseHead()
		}
	}
	q.firstAt = now
	return dst, q.names
}

// len is how many samples are queued.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}
