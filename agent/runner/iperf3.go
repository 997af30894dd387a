package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Iperf3ConnectTimeout is the client's --connect-timeout: how long iperf3
// 3.12 tries to open its control connection before it reports "Connection
// timed out".
const Iperf3ConnectTimeout = 5 * time.Second

// iperf3Command builds `iperf3 -c TARGET -p PORT -J -i 0 -t SECONDS -P
// STREAMS [-l LEN] [-u -b BPS] --connect-timeout MS` from a normalized spec.
// -i 0 drops the per-second interval reports, which would make the JSON of
// a 300 s run with 128 streams larger than proc.MaxOutputBytes.
func iperf3Command(spec *measurev1.TestSpec, target string, port uint32, netns string) proc.Command {
	p := spec.GetIperf3()
	args := append(familyFlag(target),
		"-c", target,
		"-p", strconv.FormatUint(uint64(port), 10),
		"-J",
		"-i", "0",
		"-t", strconv.FormatInt(int64(p.GetDuration().AsDuration()/time.Second), 10),
		"-P", strconv.FormatUint(uint64(p.GetParallelStreams()), 10),
	)
	if b := p.GetBlockSizeBytes(); b > 0 {
		args = append(args, "-l", strconv.FormatUint(b, 10))
	}
	if spec.GetTest() == measurev1.Test_TEST_IPERF3_UDP {
		args = append(args, "-u", "-b", strconv.FormatUint(p.GetUdpTargetBps(), 10))
	}
	args = append(args, "--connect-timeout", strconv.FormatInt(Iperf3ConnectTimeout.Milliseconds(), 10))
	return proc.Command{Name: "iperf3", Args: args, NetNS: netns}
}

// iperf3Output is the part of iperf3 3.12's -J output that is read. Numbers
// are float64 so that any JSON number decodes; they are checked afterwards.
type iperf3Output struct {
	Start struct {
		Version       string  `json:"version"`
		TCPMSS        float64 `json:"tcp_mss"`
		TCPMSSDefault float64 `json:"tcp_mss_default"`
	} `json:"start"`
	End struct {
		SumSent     *iperf3Sum `json:"sum_sent"`
		SumReceived *iperf3Sum `json:"sum_received"`
		Sum         *iperf3Sum `json:"sum"`
		CPU         *struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
	Error string `json:"error"`
}

type iperf3Sum struct {
	Seconds       float64 `json:"seconds"`
	Bytes         float64 `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	Retransmits   float64 `json:"retransmits"`
	JitterMs      float64 `json:"jitter_ms"`
	LostPackets   float64 `json:"lost_packets"`
	Packets       float64 `json:"packets"`
	LostPercent   float64 `json:"lost_percent"`
}

// ParseIperf3 parses the JSON that `iperf3 -c ... -J` (3.12) prints, for
// test TEST_IPERF3_TCP or TEST_IPERF3_UDP, into metrics in base units.
//
// TCP: throughput_bps is end.sum_received.bits_per_second (the receiver),
// sender_throughput_bps end.sum_sent's, retransmits end.sum_sent's,
// tcp_mss_bytes start.tcp_mss (or tcp_mss_default). UDP: iperf3 3.12 puts
// the receiver's figures in end.sum_received: throughput_bps,
// jitter_seconds (jitter_ms / 1000), lost_packets, loss_ratio
// (lost/packets, or lost_percent / 100); packets is the larger of
// end.sum_sent's and end.sum_received's, as datagrams the sender sent
// beyond the receiver's last are lost (udpByPackets). iperf3 before 3.11
// prints end.sum alone, the sender's figures, which cannot tell a dead
// path from a clean one: TOOL_ERROR saying so. Both:
// bytes_sent and bytes_received, duration_seconds
// (the receiver's), sender_cpu_ratio and receiver_cpu_ratio from
// cpu_utilization_percent host_total and remote_total (100% = 1.0).
//
// The error is a *Failure. iperf3 3.12 exits 0 with -J even when it fails,
// so the JSON "error" decides: "...busy..." is BUSY, "Connection refused"
// REFUSED, "No route to host" / "Network is unreachable" UNREACHABLE,
// "Connection timed out" TIMEOUT, anything else TOOL_ERROR. Output that is
// not JSON is TOOL_ERROR with stderr's words (e.g. "parameter error") or
// PARSE_ERROR ("iperf3 output truncated at 8 MiB" first when out.Truncated).
// A UDP test is judged by the receiver's packet counts when it has them
// (udpByPackets): every datagram lost is UNREACHABLE; a receiver sum
// whose bytes say nothing arrived while its packets say some did is OK
// with an estimated throughput and a message that says so, not an outage.
// Without packet counts, a UDP test where nothing arrived (no bytes) is
// UNREACHABLE. The -i 0 runs have no intervals: the end sums decide.
//
// Figures that cannot be a measurement are PARSE_ERROR, naming the field
// (checkIperf3Sums): any end-sum figure negative, not finite or from 2^63
// up; a count (bytes, packets, lost_packets, retransmits) that is not a
// whole number; a sum with bytes or bits_per_second whose seconds is below
// 1 ms, and sum_sent.seconds 0; bits_per_second off bytes x 8 / seconds by
// more than a factor of 2 either way; jitter_ms above 1 hour; lost_packets
// above packets (the receiver's or the sender's, whichever is not 0; above
// 0 if both are); lost_percent above 100; a negative (or not finite, or 2^63 and
// up) cpu_utilization_percent host_total or remote_total.
func ParseIperf3(test measurev1.Test, out proc.Output) (*measurev1.Iperf3Metrics, error) {
	m, _, err := parseIperf3(test, out)
	return m, err
}

// parseIperf3 is ParseIperf3; note is what an OK result's message says
// (a UDP receiver sum whose bytes contradict its packet counts).
func parseIperf3(test measurev1.Test, out proc.Output) (_ *measurev1.Iperf3Metrics, note string, err error) {
	defer func() { err = parseFailure("iperf3", out, err) }()
	stdout := bytes.TrimSpace(out.Stdout)
	stderr := strings.TrimSpace(string(out.Stderr))
	var j iperf3Output
	var jsonErr error
	if i := bytes.IndexByte(stdout, '{'); i < 0 {
		jsonErr = errors.New("no JSON object")
	} else {
		jsonErr = json.NewDecoder(bytes.NewReader(stdout[i:])).Decode(&j)
	}
	if jsonErr != nil {
		switch {
		case out.Truncated:
			return nil, "", fail(measurev1.Status_STATUS_PARSE_ERROR, "%s: its JSON is cut (exit %d): %v", truncatedWords("iperf3"), out.ExitCode, jsonErr)
		case stderr != "":
			status := classifyText(stderr)
			if status == measurev1.Status_STATUS_UNSPECIFIED {
				status = measurev1.Status_STATUS_TOOL_ERROR
			}
			return nil, "", fail(status, "iperf3 exited %d: %s", out.ExitCode, stderr)
		case len(stdout) == 0:
			return nil, "", fail(measurev1.Status_STATUS_TOOL_ERROR, "iperf3 exited %d and printed nothing", out.ExitCode)
		default:
			return nil, "", fail(measurev1.Status_STATUS_PARSE_ERROR, "iperf3 output (%d bytes, exit %d) is not its JSON: %v; it starts %.60q",
				len(stdout), out.ExitCode, jsonErr, stdout)
		}
	}
	if j.Error != "" {
		status := classifyText(j.Error)
		if status == measurev1.Status_STATUS_UNSPECIFIED {
			status = measurev1.Status_STATUS_TOOL_ERROR
		}
		return nil, "", fail(status, "%s", j.Error)
	}
	sent, recv := j.End.SumSent, j.End.SumReceived
	const sentName, recvName = "end.sum_sent", "end.sum_received"
	udp := test == measurev1.Test_TEST_IPERF3_UDP
	if udp && recv == nil && j.End.Sum != nil {
		// iperf3 before 3.11 (RHEL 8's 3.5, Ubuntu 22.04's 3.9) prints a
		// UDP test's end.sum only: the sender's bytes, rate and packets
		// with the gaps the server saw, never the receiver's bytes nor
		// its last sequence number. Datagrams lost after the last that
		// arrived are in no count: a path that died after the first
		// second would read as no loss at the sender's rate.
		return nil, "", fail(measurev1.Status_STATUS_TOOL_ERROR,
			"%s prints a UDP test's end.sum only, the sender's figures: no receiver bytes and no count of the datagrams lost after the last that arrived; iperf3_udp needs iperf3 3.11 or later (end.sum_received)",
			firstNonEmpty(j.Start.Version, "this iperf3"))
	}
	if sent == nil || recv == nil {
		return nil, "", fail(measurev1.Status_STATUS_PARSE_ERROR, "iperf3 JSON has no end.sum_sent/sum_received (exit %d)", out.ExitCode)
	}
	if err := checkIperf3Sums(sentName, sent, recvName, recv); err != nil {
		return nil, "", err
	}
	if c := j.End.CPU; c != nil {
		for _, f := range []struct {
			name string
			x    float64
		}{{"host_total", c.HostTotal}, {"remote_total", c.RemoteTotal}} {
			if !finiteNonNeg(f.x) {
				return nil, "", fail(measurev1.Status_STATUS_PARSE_ERROR, "iperf3 end.cpu_utilization_percent.%s = %v is not a CPU share", f.name, f.x)
			}
		}
	}
	m := &measurev1.Iperf3Metrics{
		ThroughputBps:       recv.BitsPerSecond,
		SenderThroughputBps: sent.BitsPerSecond,
		BytesSent:           uint64(sent.Bytes),
		BytesReceived:       uint64(recv.Bytes),
		DurationSeconds:     firstPositive(recv.Seconds, sent.Seconds),
	}
	if c := j.End.CPU; c != nil {
		m.SenderCpuRatio = c.HostTotal / 100
		m.ReceiverCpuRatio = c.RemoteTotal / 100
	}
	if udp {
		m.JitterSeconds = recv.JitterMs / 1e3
		m.LostPackets = uint64(recv.LostPackets)
		m.Packets = uint64(firstPositive(sent.Packets, recv.Packets))
		if recv.Packets > 0 {
			return udpByPackets(m, sentName, sent, recvName, recv)
		}
		// No packet counts from the receiver: its bytes decide.
		m.LossRatio = math.Min(recv.LostPercent/100, 1)
		if m.ThroughputBps <= 0 {
			return nil, "", fail(measurev1.Status_STATUS_UNREACHABLE, "iperf3 UDP: nothing arrived (%d datagrams sent, %d lost)", m.Packets, m.LostPackets)
		}
		return m, "", nil
	}
	if recv.Bytes > sent.Bytes {
		// TCP delivers what was sent, once. The receiver's sum is the
		// server's, another node's word: one that claims more is refused.
		return nil, "", fail(measurev1.Status_STATUS_PARSE_ERROR, "iperf3 TCP: %s.bytes %v is over %s.bytes %v: a receiver cannot get more than was sent",
			recvName, recv.Bytes, sentName, sent.Bytes)
	}
	m.Retransmits = uint64(sent.Retransmits)
	if mss := firstPositive(j.Start.TCPMSS, j.Start.TCPMSSDefault); finiteNonNeg(mss) && mss <= math.MaxUint32 {
		m.TcpMssBytes = uint32(mss)
	}
	if m.ThroughputBps <= 0 {
		return nil, "", fail(measurev1.Status_STATUS_TOOL_ERROR, "iperf3 TCP: the receiver got %d bytes in %.3g s", m.BytesReceived, m.DurationSeconds)
	}
	return m, "", nil
}

// udpByPackets judges a UDP test by the receiver's packet counts
// (lost_packets of packets), not by its bytes: iperf3 servers have been
// seen to report bytes 0 (and bits_per_second 0) in a receiver sum whose
// packets, lost_packets and jitter_ms say most datagrams arrived, and
// reading the bytes would make that a false outage.
//
// The receiver's packets is the highest sequence number that arrived and
// its lost_packets the gaps below it (iperf3's iperf_udp.c): datagrams
// sent after the last one to arrive are in neither. When the sender sent
// more (a path that died during the test), those are lost too: packets
// is the sender's count, lost_packets the gaps plus the missing tail, and
// the message says so. Every datagram lost is UNREACHABLE.
//
// When the bytes contradict the packets, the result is OK with loss_ratio
// from the packets; bytes_received and throughput_bps are estimated from
// the datagrams that arrived at the sender's size per datagram (sum_sent
// bytes / packets), and the message says so. Without a sender's size to
// estimate from, PARSE_ERROR names the figures.
func udpByPackets(m *measurev1.Iperf3Metrics, sentName string, sent *iperf3Sum, recvName string, recv *iperf3Sum) (*measurev1.Iperf3Metrics, string, error) {
	packets, lost := recv.Packets, recv.LostPackets
	var notes []string
	if sent.Packets > packets {
		tail := sent.Packets - packets
		notes = append(notes, fmt.Sprintf("%s.packets = %v, %s.packets = %v: the last %v datagrams sent never arrived and are counted lost with the %v gaps",
			sentName, sent.Packets, recvName, packets, tail, lost))
		packets, lost = sent.Packets, lost+tail
	}
	m.Packets, m.LostPackets = uint64(packets), uint64(lost)
	m.LossRatio = math.Min(lost/packets, 1)
	arrived := packets - lost
	if arrived <= 0 {
		msg := fmt.Sprintf("iperf3 UDP: nothing arrived: %s.lost_packets = %v of packets = %v", recvName, recv.LostPackets, recv.Packets)
		if len(notes) > 0 {
			msg = "iperf3 UDP: nothing arrived: " + notes[0]
		}
		if recv.Bytes > 0 {
			msg += fmt.Sprintf(" (though its bytes = %v)", recv.Bytes)
		}
		return nil, "", fail(measurev1.Status_STATUS_UNREACHABLE, "%s", msg)
	}
	if recv.Bytes > 0 && recv.BitsPerSecond > 0 {
		if len(notes) == 0 {
			return m, "", nil
		}
		return m, "iperf3 UDP: " + notes[0], nil
	}
	said := fmt.Sprintf("%s.bytes = %v and bits_per_second = %v contradict its packets = %v, lost_packets = %v and jitter_ms = %.4g: %v datagrams arrived",
		recvName, recv.Bytes, recv.BitsPerSecond, recv.Packets, recv.LostPackets, recv.JitterMs, arrived)
	if len(notes) > 0 {
		said += "; " + notes[0]
	}
	size := 0.0
	if sent.Packets > 0 {
		size = sent.Bytes / sent.Packets
	}
	est := arrived * size
	if size <= 0 || m.DurationSeconds < minIperf3Seconds || !finiteNonNeg(est) || !finiteNonNeg(est*8/m.DurationSeconds) {
		return nil, "", fail(measurev1.Status_STATUS_PARSE_ERROR, "iperf3 UDP: %s, and %s (bytes = %v, packets = %v) and a duration of %v s give no datagram size and rate to count them in",
			said, sentName, sent.Bytes, sent.Packets, m.DurationSeconds)
	}
	m.BytesReceived = uint64(est)
	m.ThroughputBps = est * 8 / m.DurationSeconds
	return m, fmt.Sprintf("iperf3 UDP: %s; bytes_received and throughput_bps are estimated from them at %.6g bytes per datagram (%s), not measured, and this is not an outage",
		said, size, sentName), nil
}

// checkIperf3Sums checks the end sums' figures (see ParseIperf3).
func checkIperf3Sums(sentName string, sent *iperf3Sum, recvName string, recv *iperf3Sum) error {
	bad := func(format string, args ...any) error {
		return fail(measurev1.Status_STATUS_PARSE_ERROR, "iperf3 "+format, args...)
	}
	for _, s := range []struct {
		name string
		sum  *iperf3Sum
	}{{sentName, sent}, {recvName, recv}} {
		name, x := s.name, s.sum
		for _, f := range []struct {
			field string
			v     float64
			count bool
		}{
			{"seconds", x.Seconds, false}, {"bytes", x.Bytes, true}, {"bits_per_second", x.BitsPerSecond, false},
			{"retransmits", x.Retransmits, true}, {"jitter_ms", x.JitterMs, false}, {"lost_packets", x.LostPackets, true},
			{"packets", x.Packets, true}, {"lost_percent", x.LostPercent, false},
		} {
			switch {
			case math.Signbit(f.v):
				return bad("%s.%s = %v is negative", name, f.field, f.v)
			case !finiteNonNeg(f.v):
				return bad("%s.%s = %v is not finite or not below 2^63", name, f.field, f.v)
			case f.count && f.v != math.Trunc(f.v):
				return bad("%s.%s = %v is not a whole number", name, f.field, f.v)
			}
		}
		if x.Bytes > 0 || x.BitsPerSecond > 0 {
			if x.Seconds < minIperf3Seconds {
				return bad("%s.seconds = %v with %v bytes at %v bit/s: not a measurement", name, x.Seconds, x.Bytes, x.BitsPerSecond)
			}
			if want := x.Bytes * 8 / x.Seconds; x.BitsPerSecond > maxRateSkew*want || x.BitsPerSecond*maxRateSkew < want {
				return bad("%s.bits_per_second = %.6g is not bytes x 8 / seconds = %.6g x 8 / %.6g = %.6g (within a factor of %d)",
					name, x.BitsPerSecond, x.Bytes, x.Seconds, want, maxRateSkew)
			}
		}
		if x.JitterMs > maxTimeSeconds*1e3 {
			return bad("%s.jitter_ms = %v is above 1 hour, not a measurement", name, x.JitterMs)
		}
		if x.LostPercent > 100 {
			return bad("%s.lost_percent = %v is above 100", name, x.LostPercent)
		}
	}
	if sent.Seconds <= 0 {
		return bad("%s.seconds = %v: the sender ran for no time", sentName, sent.Seconds)
	}
	for _, p := range []struct {
		name    string
		packets float64
	}{{recvName, recv.Packets}, {sentName, sent.Packets}} {
		if recv.LostPackets > p.packets && (p.packets > 0 || recv.Packets+sent.Packets == 0) {
			return bad("%s.lost_packets = %v is more than %s.packets = %v", recvName, recv.LostPackets, p.name, p.packets)
		}
	}
	return nil
}

// finiteNonNeg reports whether x is a figure that fits the metrics: not
// NaN, not infinite, not negative and below 2^63.
func finiteNonNeg(x float64) bool {
	return !math.IsNaN(x) && !math.Signbit(x) && x < math.MaxInt64
}

// iperf3Results turns one iperf3 run into its result.
func iperf3Results(spec *measurev1.TestSpec, out proc.Output) []*measurev1.Result {
	m, note, err := parseIperf3(spec.GetTest(), out)
	if err != nil {
		return []*measurev1.Result{failed(spec, 0, asFailure(err))}
	}
	r := okResult(spec, 0)
	r.Metrics = &measurev1.Result_Iperf3{Iperf3: m}
	r.Message = joinWords(exitNote("iperf3", out.ExitCode, lines(out.Stderr)), note)
	return []*measurev1.Result{r}
}
