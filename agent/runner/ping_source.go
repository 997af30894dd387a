package runner

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/stats"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/proto"
)

// What iputils ping says of where its replies came from and of its own
// sends, and what ParsePing makes of it.
//
// Replies from another address: iputils counts every echo reply whose
// identifier and sequence are its own as received, whichever address it
// came from, and only flags it ("64 bytes from 10.0.0.9: icmp_seq=1 ...
// (DIFFERENT ADDRESS!)" while pinging 10.0.0.5). A dead target behind a
// box that answers for it would look healthy. ParsePing counts only the
// replies from the target (the address of ping's "PING ..." header line;
// without one, the lines ping flags), per icmp_seq: a sequence number
// answered by the target counts once, however many copies came (DUP!),
// and whether or not another address answered it first (ping then flags
// the target's own reply as DUP!). The rtt figures are then recomputed
// from the target's reply lines (ping's summary includes the others), at
// the precision ping prints them. The replies from other addresses are
// named in the message; a run with none from the target is UNREACHABLE.
//
// Local send failures: when sendmsg(2) fails (a local firewall rule's
// EPERM: "ping: sendmsg: Operation not permitted"), iputils prints the
// error on stderr and still counts the probe as transmitted, so a local
// policy reads as loss on the network. ParsePing counts those stderr lines
// (proc keeps at most proc.MaxOutputBytes of stderr; the message at most
// MaxMessageBytes): when every probe failed that way the result is
// TOOL_ERROR with ping's words; when some did, packets_transmitted and
// loss_ratio count only the probes that left the host and the message
// says how many did not. A send that found no route ("Network is
// unreachable", ENETUNREACH; "No route to host", EHOSTUNREACH: the route
// went away during the run, as it does when a CNI withdraws it) is no
// local policy but the path failing: those probes stay transmitted and
// count as lost, and the message says how many found no route.

// pingSendErrorRE matches ping's own send errors on stderr; group 1 is
// the error's words.
var pingSendErrorRE = regexp.MustCompile(`(?m)^ping: (?:sendmsg|sendto): (.+)$`)

// pingSendErrors are the send errors ping printed on stderr: local ones
// (a firewall rule's EPERM, EACCES, ENOBUFS) and route ones (ENETUNREACH,
// EHOSTUNREACH), each with the first one's line ("ping: sendmsg:
// Operation not permitted"), and stderr's other lines, trimmed.
type pingSendErrors struct {
	local, route           uint32
	localWords, routeWords string
	other                  []string
}

// pingSendFailures sorts the lines of ping's stderr into pingSendErrors.
func pingSendFailures(stderr string) (e pingSendErrors) {
	count := func(n *uint32, words *string, line string) {
		if *n == 0 {
			*words = line
		}
		if *n < math.MaxUint32 {
			*n++
		}
	}
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		switch m := pingSendErrorRE.FindStringSubmatch(line); {
		case line == "":
		case m != nil && (m[1] == "Network is unreachable" || m[1] == "No route to host"):
			count(&e.route, &e.routeWords, line)
		case m != nil:
			count(&e.local, &e.localWords, line)
		default:
			e.other = append(e.other, line)
		}
	}
	return e
}

// pingTarget returns the address ping's header line names ("PING
// 127.0.0.1 (127.0.0.1) 56(84) bytes of data."), without a zone; ok is
// false without a header or when it holds no IP address.
func pingTarget(stdout string) (netip.Addr, bool) {
	h := pingHeaderRE.FindStringSubmatch(stdout)
	if h == nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(h[1])
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// fromTarget reports whether a reply line came from target (see
// pingTarget); with no target known, whether ping did not flag it
// "(DIFFERENT ADDRESS!)".
func fromTarget(l pingReplyLine, target netip.Addr, known bool) bool {
	if !known {
		return !l.different
	}
	a, err := netip.ParseAddr(l.from)
	if err != nil {
		return false
	}
	return a.WithZone("").Unmap() == target
}

// applyPingSources counts only the target's replies of rs into m (see the
// comment at the top of this file) when some reply came from elsewhere,
// and returns what the message says of the others ("" when every reply
// was the target's). m's PacketsTransmitted is how many probes left the
// host. The error is UNREACHABLE when no reply came from the target,
// PARSE_ERROR when none of the target's replies has a time or their rtt
// is zero.
func applyPingSources(stdout string, m *measurev1.PingMetrics, rs pingReplies) (string, error) {
	target, known := pingTarget(stdout)
	var mine []pingReplyLine
	others := map[string]int{}
	var order []string
	foreign := 0
	for _, l := range rs.lines {
		if l.corrupt {
			continue // not counted by ping either
		}
		if fromTarget(l, target, known) {
			mine = append(mine, l)
			continue
		}
		foreign++
		if others[l.from] == 0 {
			order = append(order, l.from)
		}
		others[l.from]++
	}
	if foreign == 0 {
		return "", nil
	}
	slices.SortStableFunc(order, func(a, b string) int { return others[b] - others[a] })
	var from []string
	for i, a := range order {
		if i == 3 {
			from = append(from, fmt.Sprintf("and %d more", len(order)-3))
			break
		}
		from = append(from, fmt.Sprintf("%s x%d", abbrev(a), others[a]))
	}
	who := "the target"
	if known {
		who = target.String()
	}
	note := fmt.Sprintf("%d echo replies came from other addresses than %s and are not counted (%s)", foreign, who, strings.Join(from, ", "))
	// The first reply per icmp_seq from the target counts; later ones
	// are its duplicates. (-c is at most 1000: icmp_seq does not wrap.)
	seen := map[uint16]bool{}
	var counted []float64 // µs of the counted replies that have a time
	var tmin, tmax, tsum, tsum2 float64
	timed := 0
	for _, l := range mine {
		if l.hasTime {
			if timed == 0 || l.us < tmin {
				tmin = l.us
			}
			tmax = max(tmax, l.us)
			tsum += l.us
			tsum2 += l.us * l.us
			timed++
		}
		if seen[l.seq] {
			continue
		}
		seen[l.seq] = true
		if l.hasTime {
			counted = append(counted, l.us)
		}
	}
	received := uint32(len(seen))
	if received == 0 {
		return "", fail(measurev1.Status_STATUS_UNREACHABLE, "0/%d echo replies from %s; %s", m.PacketsTransmitted, who, note)
	}
	if len(counted) == 0 {
		return "", fail(measurev1.Status_STATUS_PARSE_ERROR, "%d echo replies from %s but none with a time (all truncated); %s", received, who, note)
	}
	if tsum <= 0 || stats.Median(counted) <= 0 {
		return "", fail(measurev1.Status_STATUS_PARSE_ERROR, "the rtt of %s's echo replies is zero; %s", who, note)
	}
	m.PacketsReceived = received
	m.Duplicates = uint32(len(mine)) - received
	m.LossRatio = 1 - float64(received)/float64(m.PacketsTransmitted)
	// As ping computes its summary: every timed reply, duplicates too.
	avg := tsum / float64(timed)
	mdev := math.Sqrt(max(0, tsum2/float64(timed)-avg*avg))
	m.RttMinSeconds, m.RttMaxSeconds = tmin/1e6, tmax/1e6
	m.RttAvgSeconds = min(max(avg, tmin), tmax) / 1e6
	m.RttMdevSeconds = min(mdev, tmax) / 1e6
	m.RttMedianSeconds = proto.Float64(stats.Median(counted) / 1e6)
	return note + "; rtt figures are from the target's replies only", nil
}
