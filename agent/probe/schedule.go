package probe

import (
	"encoding/binary"
	"hash/fnv"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// seriesKey names one (destination, path, kind, family) series. fam is
// IP_FAMILY_UNSPECIFIED for IPv4 when the plan lists no families (the
// summaries then leave ip_family unset, as before families existed).
type seriesKey struct {
	peer string
	path measurev1.Path
	kind measurev1.ProbeKind
	fam  measurev1.IPFamily
}

// v6 reports whether the series is probed over IPv6.
func (k seriesKey) v6() bool { return k.fam == measurev1.IPFamily_IP_FAMILY_IPV6 }

// target is one scheduled probe: a series and where it goes.
type target struct {
	key   seriesKey
	net   int // index into the prober's networks: 0 host, 1 pod (key.v6: its IPv6 sockets)
	dst   netip.Addr
	port  uint16 // TCP and HTTP
	size  int    // ICMP: payload bytes; ICMP_MTU: payload filling the MTU
	phase time.Duration
}

// pathEnds returns the source network index of a path and the peer's
// address and MTU on it (zero Addr: the peer has none).
func pathEnds(pa measurev1.Path, pe peer, v6 bool) (src int, dst netip.Addr, peerMTU int) {
	host, pod, service := pe.hostIP, pe.podIP, pe.serviceIP
	if v6 {
		host, pod, service = pe.hostIP6, pe.podIP6, pe.serviceIP6
	}
	switch pa {
	case measurev1.Path_PATH_HOST_TO_HOST:
		return 0, host, pe.hostMTU
	case measurev1.Path_PATH_HOST_TO_POD:
		return 0, pod, pe.podMTU
	case measurev1.Path_PATH_POD_TO_POD:
		return 1, pod, pe.podMTU
	case measurev1.Path_PATH_POD_TO_SERVICE:
		return 1, service, 0
	case measurev1.Path_PATH_HOST_TO_SERVICE:
		return 0, service, 0
	}
	return -1, netip.Addr{}, 0
}

// targets lists the probes of a plan that can apply, sorted by phase, in
// each of the settings' families: a path from a network the node lacks
// (for IPv6: a network without an IPv6 address), to an address of the
// family the peer lacks, an ICMP kind to a service, an MTU probe with an
// unknown MTU at either end, or a TCP or HTTP probe to a peer without
// that port are left out.
func targets(node string, nets []*Network, pl *plan) []target {
	s := pl.settings
	if s == nil {
		return nil
	}
	names := make([]string, 0, len(pl.peers))
	for n := range pl.peers {
		names = append(names, n)
	}
	sort.Strings(names)
	fams := s.families
	if len(fams) == 0 {
		fams = []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_UNSPECIFIED} // IPv4, unlabelled
	}
	out := make([]target, 0, len(names)*len(s.paths)*len(s.kinds)*len(fams))
	for _, fam := range fams {
		v6 := fam == measurev1.IPFamily_IP_FAMILY_IPV6
		for _, n := range names {
			out = appendTargets(out, node, nets, s, n, pl.peers[n], fam, v6)
		}
	}
	slices.SortStableFunc(out, func(a, b target) int { return int(a.phase - b.phase) })
	return out
}

// appendTargets appends the probes to one peer in one family (see targets).
func appendTargets(out []target, node string, nets []*Network, s *settings, n string, pe peer, fam measurev1.IPFamily, v6 bool) []target {
	{
		if pe.maintenance {
			return out // cordoned: an endpoint, not probed
		}
		for _, pa := range s.paths {
			src, dst, peerMTU := pathEnds(pa, pe, v6)
			if src < 0 || src >= len(nets) || nets[src] == nil || !dst.IsValid() || (v6 && dst.Is4()) {
				continue
			}
			if v6 && !nets[src].IPv6.IsValid() {
				continue
			}
			service := pa == measurev1.Path_PATH_POD_TO_SERVICE || pa == measurev1.Path_PATH_HOST_TO_SERVICE
			for _, k := range s.kinds {
				t := target{key: seriesKey{n, pa, k, fam}, net: src, dst: dst}
				switch k {
				case measurev1.ProbeKind_PROBE_KIND_ICMP:
					if service || (!v6 && !dst.Is4()) {
						continue
					}
					t.size = s.payload
				case measurev1.ProbeKind_PROBE_KIND_ICMP_MTU:
					own := nets[src].MTU
					if service || (!v6 && !dst.Is4()) || own == 0 || peerMTU == 0 {
						continue
					}
					t.size = min(own, peerMTU, protocol.MaxMTUBytes) - 28
					if v6 {
						t.size = min(own, peerMTU, protocol.MaxMTUBytes) - 48 // IPv6 header 40, ICMPv6 8
					}
				case measurev1.ProbeKind_PROBE_KIND_TCP:
					if t.port = pe.probePort; t.port == 0 {
						continue
					}
				case measurev1.ProbeKind_PROBE_KIND_HTTP:
					if t.port = pe.httpPort; t.port == 0 {
						continue
					}
				}
				t.phase = phase(node, t.key, s.interval)
				out = append(out, t)
			}
		}
	}
	return out
}

// hash64 is FNV-1a over the parts (each followed by a 0 byte), finished
// with splitmix64's mixer so that nearby inputs spread.
func hash64(parts ...[]byte) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write(p)
		_, _ = h.Write([]byte{0})
	}
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// phase is the probe's offset within the interval: a hash of the agent's
// node, the peer, the path and the kind, so stable across restarts and
// plans, and different from agent to agent.
func phase(node string, k seriesKey, interval time.Duration) time.Duration {
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], uint32(k.path))
	binary.BigEndian.PutUint32(b[4:], uint32(k.kind))
	if k.v6() { // IPv4's phases stay as they were before families
		return time.Duration(hash64([]byte(node), []byte(k.peer), b[:], []byte{6}) % uint64(interval))
	}
	return time.Duration(hash64([]byte(node), []byte(k.peer), b[:]) % uint64(interval))
}

// subset returns the subsetSize peers with the highest rendezvous hash of
// (agent, peer, epoch), or nil (every peer) when subsetSize is 0 or not
// under the number of peers.
func subset(node string, peers map[string]peer, subsetSize int, epoch int64) map[string]bool {
	if subsetSize == 0 || subsetSize >= len(peers) {
		return nil
	}
	type scored struct {
		name  string
		score uint64
	}
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(epoch))
	all := make([]scored, 0, len(peers))
	for n := range peers {
		all = append(all, scored{n, hash64([]byte(node), []byte(n), e[:])})
	}
	slices.SortFunc(all, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	out := make(map[string]bool, subsetSize)
	for _, s := range all[:subsetSize] {
		out[s.name] = true
	}
	return out
}

// wheel walks the phase-sorted targets cycle after cycle: the next probe
// is targets[i] at cycle+phase. Cycles are aligned to the wall clock
// (multiples of interval since the Unix epoch).
type wheel struct {
	targets  []target
	interval time.Duration
	cycle    time.Time
	i        int
}

// reset places the wheel at the first probe due at or after now.
func (w *wheel) reset(ts []target, interval time.Duration, now time.Time) {
	w.targets, w.interval = ts, interval
	w.cycle = now.Truncate(interval)
	off := now.Sub(w.cycle)
	w.i = sort.Search(len(ts), func(i int) bool { return ts[i].phase >= off })
	if w.i == len(ts) {
		w.i, w.cycle = 0, w.cycle.Add(interval)
	}
}

// next returns the next probe and when it is due; ok is false when the
// wheel is empty.
func (w *wheel) next() (t *target, due time.Time, ok bool) {
	if len(w.targets) == 0 {
		return nil, time.Time{}, false
	}
	t = &w.targets[w.i]
	return t, w.cycle.Add(t.phase), true
}

// advance moves past the probe next returned.
func (w *wheel) advance() {
	if w.i++; w.i == len(w.targets) {
		w.i, w.cycle = 0, w.cycle.Add(w.interval)
	}
}

// bucket is a token bucket of rate tokens per second holding at most
// burst tokens.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newBucket(rate int, now time.Time) bucket {
	burst := max(1, float64(rate)/10)
	return bucket{rate: float64(rate), burst: burst, tokens: burst, last: now}
}

// take takes one token if there is one at now.
func (b *bucket) take(now time.Time) bool {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// The prober's two wheels (loop.wheels).
const (
	// wheelExact holds the ICMP probes: each starts at its own due time,
	// first in its wakeup, as ping's echoes do. Started in a burst, an
	// echo finds a CPU kept awake and a warm cache, and reads less than
	// ping's on the same path at the same pace.
	wheelExact = iota
	// wheelSlack holds the TCP and HTTP probes: they may start up to
	// startSlack early, in another probe's wakeup. Their figures are
	// fresh connections' (handshake, accept, teardown), held to the
	// tools back to back (make fidelity), not at the ICMP pace.
	wheelSlack
)

// splitTargets splits phase-sorted targets into the ICMP ones (for
// wheelExact) and the others (wheelSlack), each still sorted by phase.
func splitTargets(ts []target) (exact, slack []target) {
	for _, t := range ts {
		switch t.key.kind {
		case measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU:
			exact = append(exact, t)
		default:
			slack = append(slack, t)
		}
	}
	return exact, slack
}

// startSlack is how early a TCP or HTTP probe may start: a step starts
// every one due within this much of now, so that they share the loop's
// wakeups, mostly an ICMP probe's, instead of each waking it alone. A
// probe's due time, not its start, places it in its period; its round
// trip is measured from its own send. 25 ms at most, and a 400th of the
// interval (always under an interval).
func startSlack(interval time.Duration) time.Duration {
	return min(interval/400, 25*time.Millisecond)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
