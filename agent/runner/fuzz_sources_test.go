package runner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/agent/proc"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Properties of issue 11's honest parsers that every fuzzed run must keep
// (checkHonest, called by fuzzRun), and FuzzPingSources, which prints
// well-formed iputils output with replies from the target and from other
// addresses and checks that only the target's count.

var (
	fuzzReplyRE = regexp.MustCompile(`(?m)^\d+ bytes from (\S+): icmp_seq=(\d+) `)
)

// sendErrorLines counts stderr's lines that are ping's local send
// errors: "ping: sendmsg: WORDS" or "ping: sendto: WORDS", spaces
// around, but for the two that say the route is gone ("Network is
// unreachable", "No route to host"), which count as loss.
func sendErrorLines(stderr []byte) int {
	n := 0
	for _, l := range strings.Split(string(stderr), "\n") {
		l = strings.TrimSpace(l)
		for _, p := range []string{"ping: sendmsg: ", "ping: sendto: "} {
			words, ok := strings.CutPrefix(l, p)
			if ok && words != "" && words != "Network is unreachable" && words != "No route to host" {
				n++
			}
		}
	}
	return n
}

// checkHonest checks what results never do whatever the output:
//   - an OK result of a tool that exited non-zero says so in its message
//     (ping, qperf, iperf3; curl's non-zero exit is never OK);
//   - an OK ping result counts at most as many replies as there are
//     distinct icmp_seq among the reply lines from the header's target,
//     and its transmitted count leaves out the sends ping reported failed
//     on stderr;
//   - an OK curl result has no time beyond twice its --max-time plus 1 s.
func checkHonest(t *testing.T, spec *measurev1.TestSpec, out proc.Output, results []*measurev1.Result) {
	t.Helper()
	for _, r := range results {
		if r.GetStatus() != measurev1.Status_STATUS_OK {
			continue
		}
		tool := toolName(spec)
		if out.ExitCode != 0 && !strings.Contains(r.GetMessage(), "exited") && !strings.Contains(r.GetMessage(), "killed") {
			t.Errorf("%s exit %d, OK without a word of it: %q", tool, out.ExitCode, r.GetMessage())
		}
		switch tool {
		case "ping":
			p := r.GetPing()
			stdout := string(out.Stdout)
			if target, ok := pingTarget(stdout); ok {
				seqs := map[string]bool{}
				for _, m := range fuzzReplyRE.FindAllStringSubmatch(stdout, -1) {
					if l := (pingReplyLine{from: m[1]}); fromTarget(l, target, true) {
						seqs[m[2]] = true
					}
				}
				if int(p.GetPacketsReceived()) > len(seqs) {
					t.Errorf("%d received, but %d icmp_seq answered by %s", p.GetPacketsReceived(), len(seqs), target)
				}
			}
			if sums := pingSummaryRE.FindAllStringSubmatch(stdout, -1); len(sums) > 0 {
				printed, _ := strconv.ParseUint(sums[len(sums)-1][1], 10, 32)
				failed := sendErrorLines(out.Stderr)
				if uint64(p.GetPacketsTransmitted())+uint64(failed) != printed {
					t.Errorf("packets_transmitted %d, ping said %d with %d local send errors", p.GetPacketsTransmitted(), printed, failed)
				}
			}
		case "curl":
			h, bound := r.GetHttp(), curlBound(spec.GetHttp().GetTimeout().AsDuration())
			for _, x := range []float64{h.GetNamelookupSeconds(), h.GetConnectSeconds(), h.GetTlsSeconds(), h.GetFirstByteSeconds(), h.GetTotalSeconds()} {
				if x > bound {
					t.Errorf("curl time %v s beyond %v s (--max-time %v): %v", x, bound, spec.GetHttp().GetTimeout().AsDuration(), h)
				}
			}
		}
	}
}

// FuzzPingSources prints iputils ping output for fuzzed replies (a byte
// each: low bit from another address, the next bits the icmp_seq, the
// rest the time) with ping's own DUP! flags and summary, which counts
// every reply, and checks that ParsePing counts one reply per icmp_seq
// the target answered: UNREACHABLE when it answered none, else that
// many received and the others in the message.
func FuzzPingSources(f *testing.F) {
	f.Add([]byte{0, 2, 4, 6}, uint8(4))
	f.Add([]byte{1, 3, 5}, uint8(3))
	f.Add([]byte{1, 0, 3, 2, 0x13, 0x12}, uint8(6))
	f.Fuzz(func(t *testing.T, data []byte, count uint8) {
		n := int(count%32) + 1
		if len(data) == 0 || len(data) > 200 {
			return
		}
		const target, other = "10.0.0.5", "10.0.0.9"
		var b strings.Builder
		fmt.Fprintf(&b, "PING %s (%s) 56(84) bytes of data.\n", target, target)
		seen := map[int]bool{}
		mine := map[int]bool{}
		var tmin, tmax, tsum int64 = 1 << 40, 0, 0
		var tsum2 float64
		foreign := 0
		for _, d := range data {
			seq := 1 + int(d>>1)%n
			us := 10 + int64(d>>6)*7
			from, flags := target, ""
			if d&1 == 1 {
				from, flags = other, " (DIFFERENT ADDRESS!)"
				foreign++
			} else {
				mine[seq] = true
			}
			if seen[seq] {
				flags = " (DUP!)" + flags
			}
			seen[seq] = true
			fmt.Fprintf(&b, "64 bytes from %s: icmp_seq=%d ttl=64 time=%d.%03d ms%s\n", from, seq, us/1000, us%1000, flags)
			tmin, tmax, tsum, tsum2 = min(tmin, us), max(tmax, us), tsum+us, tsum2+float64(us*us)
		}
		lines := int64(len(data))
		avg := tsum / lines
		mdev := int64(0)
		if v := tsum2/float64(lines) - float64(avg*avg); v > 0 {
			for mdev*mdev < int64(v) {
				mdev++
			}
		}
		ms := func(us int64) string { return fmt.Sprintf("%d.%03d", us/1000, us%1000) }
		dups := ""
		if d := len(data) - len(seen); d > 0 {
			dups = fmt.Sprintf(", +%d duplicates", d)
		}
		fmt.Fprintf(&b, "\n--- %s ping statistics ---\n%d packets transmitted, %d received%s, %d%% packet loss, time 100ms\n",
			target, n, len(seen), dups, 100*(n-len(seen))/n)
		fmt.Fprintf(&b, "rtt min/avg/max/mdev = %s/%s/%s/%s ms\n", ms(tmin), ms(avg), ms(tmax), ms(min(mdev, tmax)))
		out := proc.Output{Stdout: []byte(b.String())}
		m, err := ParsePing(out)
		if len(mine) == 0 {
			if f := asFailure(err); err == nil || f.Status != measurev1.Status_STATUS_UNREACHABLE {
				t.Fatalf("no reply from the target: got %v, %v\n%s", m, err, b.String())
			}
			return
		}
		if err != nil {
			t.Fatalf("ParsePing: %v\n%s", err, b.String())
		}
		if int(m.GetPacketsReceived()) != len(mine) || m.GetPacketsTransmitted() != uint32(n) {
			t.Errorf("received %d of %d, want %d of %d\n%s", m.GetPacketsReceived(), m.GetPacketsTransmitted(), len(mine), n, b.String())
		}
		spec := fuzzSpec(measurev1.Tool_TOOL_PING, 0, nil)
		spec.GetPing().Count = uint32(n)
		results, _ := resultsOf(spec, out, nil)
		checkResults(t, spec, results)
		if msg := results[0].GetMessage(); foreign > 0 && !strings.Contains(msg, fmt.Sprintf("%d echo replies came from other addresses than %s", foreign, target)) {
			t.Errorf("message %q does not name the %d replies from %s", msg, foreign, other)
		}
	})
}
