package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// triggerFlags are `coordinator trigger`'s own flags.
type triggerFlags struct {
	tests, paths, pairs []string
	external            []string
	repeats             uint32
	duration            time.Duration
	pingCount           uint32
	msgSizes            []string
	sweep               bool
	streams, blockSizes []string
	maxHeavy            uint32
	// http_load's parameters (0 or false: the defaults).
	loadRequests, loadConcurrency uint32
	keepAlive                     bool
	loadTimeout                   time.Duration
	label                         string
	ipFamily                      string
	noWait                        bool
	onInterrupt                   string // --on-interrupt; empty: see interruptPolicy
}

// sweepSizes is the field's qperf sweep: 64 B to 64 KiB, doubling.
func sweepSizes() []uint64 {
	var out []uint64
	for s := uint64(64); s <= 64<<10; s *= 2 {
		out = append(out, s)
	}
	return out
}

// spec turns the flags into a RunSpec; the coordinator validates the
// values. iperf3 streams and block sizes are swept: one test per
// combination, so the parameters are part of each result's identity.
func (tf *triggerFlags) spec() (*measurev1.RunSpec, error) {
	spec := &measurev1.RunSpec{Repeats: tf.repeats, MaxConcurrentHeavy: tf.maxHeavy, Label: tf.label}
	families, err := protocol.ParseFamilies(tf.ipFamily)
	if err != nil {
		return nil, fmt.Errorf("--ip-family: %w", err)
	}
	spec.IpFamilies = families
	names := splitList(tf.tests)
	if len(names) == 0 {
		for _, t := range []measurev1.Test{
			measurev1.Test_TEST_PING, measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_QPERF_TCP_BW,
			measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_HTTP,
		} {
			names = append(names, testspec.Name(t))
		}
	}
	if err := tf.checkParamsApply(names); err != nil {
		return nil, err
	}
	sizes, err := byteList("--msg-sizes", tf.msgSizes)
	if err != nil {
		return nil, err
	}
	if tf.sweep {
		if len(sizes) > 0 {
			return nil, fmt.Errorf("--sweep and --msg-sizes both choose qperf message sizes: give one")
		}
		sizes = sweepSizes()
	}
	streams, err := byteList("--streams", tf.streams)
	if err != nil {
		return nil, err
	}
	blocks, err := byteList("--block-sizes", tf.blockSizes)
	if err != nil {
		return nil, err
	}
	var dur *durationpb.Duration
	if tf.duration != 0 {
		dur = durationpb.New(tf.duration)
	}
	for _, name := range names {
		t, err := testspec.ParseTest(name)
		if err != nil {
			return nil, fmt.Errorf("--tests: %w", err)
		}
		switch testspec.Tool(t) {
		case measurev1.Tool_TOOL_PING:
			ts := &measurev1.TestSpec{Test: t}
			if tf.pingCount != 0 {
				ts.Params = &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: tf.pingCount}}
			}
			spec.Tests = append(spec.Tests, ts)
		case measurev1.Tool_TOOL_QPERF:
			ts := &measurev1.TestSpec{Test: t}
			if dur != nil || len(sizes) > 0 {
				ts.Params = &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: dur, MsgSizeBytes: sizes}}
			}
			spec.Tests = append(spec.Tests, ts)
		case measurev1.Tool_TOOL_IPERF3:
			for _, st := range orZero(streams) {
				for _, bl := range orZero(blocks) {
					ts := &measurev1.TestSpec{Test: t}
					if dur != nil || st != 0 || bl != 0 {
						ts.Params = &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{Duration: dur, ParallelStreams: uint32(st), BlockSizeBytes: bl}}
					}
					spec.Tests = append(spec.Tests, ts)
				}
			}
		case measurev1.Tool_TOOL_AB:
			ts := &measurev1.TestSpec{Test: t}
			if tf.loadRequests != 0 || tf.loadConcurrency != 0 || tf.keepAlive || tf.loadTimeout != 0 {
				p := &measurev1.HttpLoadParams{Requests: tf.loadRequests, Concurrency: tf.loadConcurrency, KeepAlive: tf.keepAlive}
				if tf.loadTimeout != 0 {
					p.Timeout = durationpb.New(tf.loadTimeout)
				}
				ts.Params = &measurev1.TestSpec_HttpLoad{HttpLoad: p}
			}
			spec.Tests = append(spec.Tests, ts)
		default:
			spec.Tests = append(spec.Tests, &measurev1.TestSpec{Test: t})
		}
	}
	for _, name := range splitList(tf.paths) {
		p, err := testspec.ParsePath(name)
		if err != nil {
			return nil, fmt.Errorf("--paths: %w", err)
		}
		spec.Paths = append(spec.Paths, p)
	}
	spec.ExternalTargets = splitList(tf.external)
	for _, s := range tf.pairs {
		src, dst, ok := strings.Cut(s, ":")
		if !ok || src == "" || dst == "" {
			return nil, fmt.Errorf("--pair %q: want SRC:DST", s)
		}
		spec.Pairs = append(spec.Pairs, &measurev1.NodePair{SrcNode: src, DstNode: dst})
	}
	return spec, nil
}

// orZero is xs, or a single 0 (the tool's default) when xs is empty.
func orZero(xs []uint64) []uint64 {
	if len(xs) == 0 {
		return []uint64{0}
	}
	return xs
}

// byteList parses comma-separated counts: plain numbers, or with a K or M
// suffix (1024-based).
func byteList(flag string, vals []string) ([]uint64, error) {
	var out []uint64
	for _, s := range splitList(vals) {
		mult := uint64(1)
		num := strings.TrimSuffix(strings.ToUpper(s), "B")
		switch {
		case strings.HasSuffix(num, "KI"), strings.HasSuffix(num, "K"):
			num, mult = strings.TrimSuffix(strings.TrimSuffix(num, "I"), "K"), 1<<10
		case strings.HasSuffix(num, "MI"), strings.HasSuffix(num, "M"):
			num, mult = strings.TrimSuffix(strings.TrimSuffix(num, "I"), "M"), 1<<20
		}
		n, err := strconv.ParseUint(num, 10, 32)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%s: %q is not a positive count (bytes, or with K/M)", flag, s)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// checkParamsApply refuses a parameter flag that no chosen test uses, so
// that nothing is silently ignored.
func (tf *triggerFlags) checkParamsApply(names []string) error {
	uses := map[measurev1.Tool]bool{}
	for _, name := range names {
		if t, err := testspec.ParseTest(name); err == nil {
			uses[testspec.Tool(t)] = true
		}
	}
	for _, f := range []struct {
		flag  string
		set   bool
		tools []measurev1.Tool
	}{
		{"--msg-sizes", len(tf.msgSizes) > 0, []measurev1.Tool{measurev1.Tool_TOOL_QPERF}},
		{"--sweep", tf.sweep, []measurev1.Tool{measurev1.Tool_TOOL_QPERF}},
		{"--duration", tf.duration != 0, []measurev1.Tool{measurev1.Tool_TOOL_QPERF, measurev1.Tool_TOOL_IPERF3}},
		{"--streams", len(tf.streams) > 0, []measurev1.Tool{measurev1.Tool_TOOL_IPERF3}},
		{"--block-sizes", len(tf.blockSizes) > 0, []measurev1.Tool{measurev1.Tool_TOOL_IPERF3}},
		{"--ping-count", tf.pingCount != 0, []measurev1.Tool{measurev1.Tool_TOOL_PING}},
		{"--requests", tf.loadRequests != 0, []measurev1.Tool{measurev1.Tool_TOOL_AB}},
		{"--concurrency", tf.loadConcurrency != 0, []measurev1.Tool{measurev1.Tool_TOOL_AB}},
		{"--keep-alive", tf.keepAlive, []measurev1.Tool{measurev1.Tool_TOOL_AB}},
		{"--load-timeout", tf.loadTimeout != 0, []measurev1.Tool{measurev1.Tool_TOOL_AB}},
	} {
		if !f.set {
			continue
		}
		used := false
		for _, t := range f.tools {
			used = used || uses[t]
		}
		if !used {
			return fmt.Errorf("%s is set but no chosen test uses it (tests: %s)", f.flag, strings.Join(names, ","))
		}
	}
	if tf.duration%time.Second != 0 {
		return fmt.Errorf("--duration %v: qperf and iperf3 take whole seconds", tf.duration)
	}
	if tf.loadTimeout%time.Second != 0 || tf.loadTimeout < 0 {
		return fmt.Errorf("--load-timeout %v: ab takes whole seconds", tf.loadTimeout)
	}
	return nil
}
