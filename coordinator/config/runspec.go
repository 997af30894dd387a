package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// RunInput is what a RunSpec is built from (BuildRunSpec): the flags of
// `coordinator trigger`, or a schedule of the file's monitor section. Each
// list holds one name or count per entry (the CLI splits its
// comma-separated flags first); zero values mean the defaults.
type RunInput struct {
	// Tests are test names (testspec.ParseTest); empty means
	// testspec.DefaultTests.
	Tests []string
	// Paths are path names (testspec.ParsePath); empty means the
	// coordinator's default paths (testspec.DefaultPaths, with the
	// external paths for a run of external targets).
	Paths []string
	// Pairs are node pairs "SRC:DST"; empty means every ordered pair.
	Pairs []string
	// ExternalTargets are names of the coordinator's external targets,
	// passed through (the coordinator, or the config file's allowlist,
	// checks them).
	ExternalTargets []string
	// Repeats is the number of samples per test; 0 means the defaults.
	Repeats uint32
	// MeshRounds is how many rounds of the full mesh a run without Pairs
	// measures (RunSpec.mesh_rounds); 0 means all of them.
	MeshRounds uint32
	// FirstMeshRound is the first of the MeshRounds
	// (RunSpec.first_mesh_round); only with MeshRounds.
	FirstMeshRound uint32
	// MaxConcurrentHeavy bounds the qperf and iperf3 tests at once; 0
	// means one per node pair of a round.
	MaxConcurrentHeavy uint32
	// Label names the run.
	Label string
	// IPFamily is "", ipv4, ipv6 or dual (protocol.ParseFamilies); ""
	// means every family both nodes of a pair have.
	IPFamily string
	// Duration is the qperf and iperf3 measuring time, whole seconds; 0
	// means the default (2 s).
	Duration time.Duration
	// PingCount is the echo requests per ping test; 0 means 5.
	PingCount uint32
	// MsgSizes are qperf message sizes: a count of bytes, or with a K or
	// M suffix (1024-based), e.g. "64", "1K"; at most one of MsgSizes and
	// Sweep.
	MsgSizes []string
	// Sweep sets the qperf message sizes to the field's sweep: 64 B to 64
	// KiB, doubling.
	Sweep bool
	// Streams are iperf3 parallel stream counts and BlockSizes iperf3
	// block sizes (-l, bytes or with K/M): one iperf3 test per
	// combination.
	Streams, BlockSizes []string
	// LoadRequests, LoadConcurrency, KeepAlive and LoadTimeout (whole
	// seconds) are http_load's parameters; zero values mean its defaults.
	LoadRequests, LoadConcurrency uint32
	// KeepAlive: see LoadRequests.
	KeepAlive bool
	// LoadTimeout: see LoadRequests.
	LoadTimeout time.Duration
	// Strict refuses a parameter that no chosen test uses and a duration
	// that is not whole seconds before any test is built (the CLI's rule:
	// no flag is silently ignored); without it such a parameter is
	// ignored and a fractional duration is refused by the test it reaches.
	Strict bool
}

// Field is a field of RunInput that an error may name.
type Field int

// The fields of RunInput that errors name (Names.Key).
const (
	FieldTests Field = iota
	FieldPaths
	FieldPairs
	FieldIPFamily
	FieldDuration
	FieldPingCount
	FieldMsgSizes
	FieldSweep
	FieldStreams
	FieldBlockSizes
	FieldRequests
	FieldConcurrency
	FieldKeepAlive
	FieldLoadTimeout
	FieldFirstMeshRound
)

// Names says how BuildRunSpec's errors name the input's fields: Key maps
// each Field to a flag ("--msg-sizes") or a config key ("tests"); with
// Indexed, an error about one entry of a list names its index
// ("tests[2]"), else the list alone ("--tests").
type Names struct {
	// Key is each field's name; a field without one is named by its
	// number.
	Key map[Field]string
	// Indexed: see Names.
	Indexed bool
}

func (n Names) key(f Field) string {
	if k, ok := n.Key[f]; ok {
		return k
	}
	return fmt.Sprintf("field %d", int(f))
}

// entry names entry i of list f.
func (n Names) entry(f Field, i int) string {
	if n.Indexed {
		return fmt.Sprintf("%s[%d]", n.key(f), i)
	}
	return n.key(f)
}

// scheduleNames are the config keys of a schedule, for its errors.
var scheduleNames = Names{Indexed: true, Key: map[Field]string{
	FieldTests: "tests", FieldPaths: "paths", FieldDuration: "duration", FieldSweep: "sweep",
}}

// sweepSizes is the field's qperf sweep: 64 B to 64 KiB, doubling.
func sweepSizes() []uint64 {
	var out []uint64
	for s := uint64(64); s <= 64<<10; s *= 2 {
		out = append(out, s)
	}
	return out
}

// BuildRunSpec turns in into a RunSpec: each test named once, with the
// parameters of its tool, iperf3 swept over Streams x BlockSizes (one test
// per combination, so the parameters are part of each result's identity),
// and each test checked as the coordinator will (testspec.Normalize).
// Errors name the field (as names says) and the value; the coordinator
// checks what needs the mesh (nodes, external targets).
func BuildRunSpec(in RunInput, names Names) (*measurev1.RunSpec, error) {
	if in.FirstMeshRound != 0 && in.MeshRounds == 0 {
		return nil, fmt.Errorf("%s %d: counts rounds of mesh_rounds, and there are none", names.key(FieldFirstMeshRound), in.FirstMeshRound)
	}
	spec := &measurev1.RunSpec{Repeats: in.Repeats, MaxConcurrentHeavy: in.MaxConcurrentHeavy, Label: in.Label,
		MeshRounds: in.MeshRounds, FirstMeshRound: in.FirstMeshRound}
	families, err := protocol.ParseFamilies(in.IPFamily)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", names.key(FieldIPFamily), err)
	}
	spec.IpFamilies = families
	tests := in.Tests
	if len(tests) == 0 {
		tests = testspec.NamesOf(testspec.DefaultTests())
	}
	if in.Strict {
		if err := in.checkParamsApply(tests, names); err != nil {
			return nil, err
		}
	}
	sizes, err := byteList(names, FieldMsgSizes, in.MsgSizes)
	if err != nil {
		return nil, err
	}
	if in.Sweep {
		if len(sizes) > 0 {
			return nil, fmt.Errorf("%s and %s both choose qperf message sizes: give one", names.key(FieldSweep), names.key(FieldMsgSizes))
		}
		sizes = sweepSizes()
	}
	streams, err := byteList(names, FieldStreams, in.Streams)
	if err != nil {
		return nil, err
	}
	blocks, err := byteList(names, FieldBlockSizes, in.BlockSizes)
	if err != nil {
		return nil, err
	}
	for i, name := range tests {
		t, err := testspec.ParseTest(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names.entry(FieldTests, i), err)
		}
		for _, ts := range in.testSpecs(t, sizes, streams, blocks) {
			if _, err := testspec.Normalize(ts); err != nil {
				return nil, fmt.Errorf("%s %s: %w", names.entry(FieldTests, i), name, err)
			}
			spec.Tests = append(spec.Tests, ts)
		}
	}
	for i, name := range in.Paths {
		p, err := testspec.ParsePath(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names.entry(FieldPaths, i), err)
		}
		spec.Paths = append(spec.Paths, p)
	}
	spec.ExternalTargets = slices.Clone(in.ExternalTargets)
	for i, s := range in.Pairs {
		src, dst, ok := strings.Cut(s, ":")
		if !ok || src == "" || dst == "" {
			return nil, fmt.Errorf("%s %q: want SRC:DST", names.entry(FieldPairs, i), s)
		}
		spec.Pairs = append(spec.Pairs, &measurev1.NodePair{SrcNode: src, DstNode: dst})
	}
	return spec, nil
}

// testSpecs are the tests of t: one, or one per iperf3 combination; a
// tool's parameters are set only when one differs from its default.
func (in *RunInput) testSpecs(t measurev1.Test, sizes, streams, blocks []uint64) []*measurev1.TestSpec {
	var dur *durationpb.Duration
	if in.Duration != 0 {
		dur = durationpb.New(in.Duration)
	}
	ts := &measurev1.TestSpec{Test: t}
	switch testspec.Tool(t) {
	case measurev1.Tool_TOOL_PING:
		if in.PingCount != 0 {
			ts.Params = &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: in.PingCount}}
		}
	case measurev1.Tool_TOOL_QPERF:
		if dur != nil || len(sizes) > 0 {
			ts.Params = &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: dur, MsgSizeBytes: slices.Clone(sizes)}}
		}
	case measurev1.Tool_TOOL_IPERF3:
		var out []*measurev1.TestSpec
		for _, st := range orZero(streams) {
			for _, bl := range orZero(blocks) {
				one := &measurev1.TestSpec{Test: t}
				if dur != nil || st != 0 || bl != 0 {
					one.Params = &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{Duration: dur, ParallelStreams: uint32(st), BlockSizeBytes: bl}}
				}
				out = append(out, one)
			}
		}
		return out
	case measurev1.Tool_TOOL_AB:
		if in.LoadRequests != 0 || in.LoadConcurrency != 0 || in.KeepAlive || in.LoadTimeout != 0 {
			p := &measurev1.HttpLoadParams{Requests: in.LoadRequests, Concurrency: in.LoadConcurrency, KeepAlive: in.KeepAlive}
			if in.LoadTimeout != 0 {
				p.Timeout = durationpb.New(in.LoadTimeout)
			}
			ts.Params = &measurev1.TestSpec_HttpLoad{HttpLoad: p}
		}
	}
	return []*measurev1.TestSpec{ts}
}

// orZero is xs, or a single 0 (the tool's default) when xs is empty.
func orZero(xs []uint64) []uint64 {
	if len(xs) == 0 {
		return []uint64{0}
	}
	return xs
}

// byteList parses the counts of field f: plain numbers, or with a K or M
// suffix (1024-based), each positive and below 2^32 before the suffix.
func byteList(names Names, f Field, vals []string) ([]uint64, error) {
	var out []uint64
	for i, s := range vals {
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
			return nil, fmt.Errorf("%s: %q is not a positive count (bytes, or with K/M)", names.entry(f, i), s)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// checkParamsApply refuses a parameter that no chosen test uses, so that
// nothing is silently ignored, and a duration that is not whole seconds.
func (in *RunInput) checkParamsApply(tests []string, names Names) error {
	uses := map[measurev1.Tool]bool{}
	for _, name := range tests {
		if t, err := testspec.ParseTest(name); err == nil {
			uses[testspec.Tool(t)] = true
		}
	}
	qperf, iperf3 := measurev1.Tool_TOOL_QPERF, measurev1.Tool_TOOL_IPERF3
	ping, ab := measurev1.Tool_TOOL_PING, measurev1.Tool_TOOL_AB
	for _, p := range []struct {
		field Field
		set   bool
		tools []measurev1.Tool
	}{
		{FieldMsgSizes, len(in.MsgSizes) > 0, []measurev1.Tool{qperf}},
		{FieldSweep, in.Sweep, []measurev1.Tool{qperf}},
		{FieldDuration, in.Duration != 0, []measurev1.Tool{qperf, iperf3}},
		{FieldStreams, len(in.Streams) > 0, []measurev1.Tool{iperf3}},
		{FieldBlockSizes, len(in.BlockSizes) > 0, []measurev1.Tool{iperf3}},
		{FieldPingCount, in.PingCount != 0, []measurev1.Tool{ping}},
		{FieldRequests, in.LoadRequests != 0, []measurev1.Tool{ab}},
		{FieldConcurrency, in.LoadConcurrency != 0, []measurev1.Tool{ab}},
		{FieldKeepAlive, in.KeepAlive, []measurev1.Tool{ab}},
		{FieldLoadTimeout, in.LoadTimeout != 0, []measurev1.Tool{ab}},
	} {
		if p.set && !slices.ContainsFunc(p.tools, func(t measurev1.Tool) bool { return uses[t] }) {
			return fmt.Errorf("%s is set but no chosen test uses it (tests: %s)", names.key(p.field), strings.Join(tests, ","))
		}
	}
	if in.Duration%time.Second != 0 {
		return fmt.Errorf("%s %v: qperf and iperf3 take whole seconds", names.key(FieldDuration), in.Duration)
	}
	if in.LoadTimeout%time.Second != 0 || in.LoadTimeout < 0 {
		return fmt.Errorf("%s %v: ab takes whole seconds", names.key(FieldLoadTimeout), in.LoadTimeout)
	}
	return nil
}
