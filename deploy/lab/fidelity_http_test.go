//go:build fidelity

package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	meshprobe "github.com/meshperf/meshperf/agent/probe"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The HTTP comparison's counts (see TestProbeFidelity): back to back,
// fidHTTPBlocks blocks each of fidHTTPB2B transfers of one curl (after its
// first, left out) and then fidHTTPB2B GETs of the prober's probe; paced,
// fidCurlPerRound transfers of one curl at fidCurlRate (after its first)
// against the Prober's run.
const (
	fidHTTPBlocks   = 2
	fidHTTPB2B      = 50
	fidCurlPerRound = 10
	fidCurlRate     = "5/s"
	// fidCurlFormat is curl's -w: a marker, then the HTTP code and the
	// times from the transfer's start, in seconds.
	fidCurlFormat = `meshperf-fid %{http_code} %{time_namelookup} %{time_connect} %{time_pretransfer} %{time_starttransfer} %{time_total}\n`
)

// fidPhases are the medians of one side's HTTP GETs, each on a fresh
// connection, in seconds from the start of its connection: connected,
// request sent (curl: time_pretransfer, when it is about to send; the
// prober: its WroteRequest hook, once written), first byte of the answer,
// last byte (the figure compared).
type fidPhases struct {
	connect, sent, first, total float64
	n                           int
}

func (ph fidPhases) String() string {
	return fmt.Sprintf("connect %s, sent %s, first byte %s, total %s (n=%d)", us(ph.connect), us(ph.sent), us(ph.first), us(ph.total), ph.n)
}

// phases returns the medians of samples, each {connect, sent, first,
// total}.
func phases(samples [][4]float64) fidPhases {
	var cols [4][]float64
	for _, s := range samples {
		for i, v := range s {
			cols[i] = append(cols[i], v)
		}
	}
	return fidPhases{median(cols[0]), median(cols[1]), median(cols[2]), median(cols[3]), len(samples)}
}

// fidCurl runs one curl from p.srcNS with n+1 GETs of the fidelity
// server's http://dst:fidHTTPPort/, each on a fresh connection
// (Connection: close), at rate ("": back to back), and returns the
// phases ({connect, sent, first, total}) of all but the first (the
// process's cold start), each less curl's time_namelookup (its own
// resolver step for an IP literal: no packet on the path).
func fidCurl(t *testing.T, p fidPath, n int, rate string) [][4]float64 {
	t.Helper()
	url := "http://" + netip.AddrPortFrom(p.dst, fidHTTPPort).String() + "/"
	argv := []string{"curl", "-q", "-sS", "--noproxy", "*", "--max-time", "2", "--connect-timeout", "2",
		"-H", "Connection: close", "-w", fidCurlFormat}
	if rate != "" {
		argv = append(argv, "--rate", rate)
	}
	for range n + 1 {
		argv = append(argv, "-o", "/dev/null", url)
	}
	out := fidRun(t, 30*time.Second, p.srcNS, argv...)
	if out.ExitCode != 0 {
		t.Fatalf("%s: curl exit %d\n%s%s", p.name, out.ExitCode, out.Stdout, out.Stderr)
	}
	var samples [][4]float64
	sc := bufio.NewScanner(bytes.NewReader(out.Stdout))
	for i := 0; sc.Scan(); i++ {
		f := strings.Fields(sc.Text())
		if len(f) != 7 || f[0] != "meshperf-fid" || f[1] != "200" {
			t.Fatalf("%s: curl transfer %d of %s: %q", p.name, i, url, sc.Text())
		}
		var v [5]float64
		for j := range v {
			x, err := strconv.ParseFloat(f[j+2], 64)
			if err != nil {
				t.Fatalf("%s: curl transfer %d: %q: %v", p.name, i, sc.Text(), err)
			}
			v[j] = x
		}
		if i > 0 {
			samples = append(samples, [4]float64{v[1] - v[0], v[2] - v[0], v[3] - v[0], v[4] - v[0]})
		}
	}
	if len(samples) != n {
		t.Fatalf("%s: %d curl transfers, want %d:\n%s%s", p.name, len(samples)+1, n+1, out.Stdout, out.Stderr)
	}
	return samples
}

// fidHTTP runs n of the prober's own HTTP probes (meshprobe.Single,
// PROBE_KIND_HTTP) from p.srcNS to the fidelity server, back to back, and
// returns their phases ({connect, sent, first, total}): the figure is the probe's (connect(2) to the last
// byte), the other phases come from httptrace hooks, measured from the
// same start (the PutIdleConn hook, called as the probe closes the answer
// right after its clock stops, less the figure).
func fidHTTP(t *testing.T, p fidPath, n int) [][4]float64 {
	t.Helper()
	checkLabNS(t, p.srcNS)
	single := meshprobe.NewSingle(meshprobe.Network{NetNS: p.srcNS, IP: p.src})
	defer single.Close()
	dst := netip.AddrPortFrom(p.dst, fidHTTPPort)
	var samples [][4]float64
	for range n {
		var mu sync.Mutex
		var connected, sent, first, closed time.Time
		stamp := func(at *time.Time) { mu.Lock(); *at = time.Now(); mu.Unlock() }
		trace := &httptrace.ClientTrace{
			ConnectDone:          func(_, _ string, _ error) { stamp(&connected) },
			WroteRequest:         func(httptrace.WroteRequestInfo) { stamp(&sent) },
			GotFirstResponseByte: func() { stamp(&first) },
			PutIdleConn:          func(error) { stamp(&closed) },
		}
		ctx, cancel := context.WithTimeout(httptrace.WithClientTrace(context.Background(), trace), time.Second)
		rtt, st, msg := single.Probe(ctx, measurev1.ProbeKind_PROBE_KIND_HTTP, dst)
		cancel()
		if st != measurev1.Status_STATUS_OK {
			t.Fatalf("%s: prober HTTP probe of %s: %v %s", p.name, dst, st, msg)
		}
		mu.Lock()
		start := closed.Add(-rtt)
		samples = append(samples, [4]float64{connected.Sub(start).Seconds(), sent.Sub(start).Seconds(), first.Sub(start).Seconds(), rtt.Seconds()})
		mu.Unlock()
	}
	return samples
}
