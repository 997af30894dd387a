package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestTriggerHelpSaysTheDefaults: the numbers trigger's help writes out
// are the ones testspec.Normalize and schedule.DefaultRepeats apply, so
// that a changed default or bound fails here until the help says it.
func TestTriggerHelpSaysTheDefaults(t *testing.T) {
	norm := func(spec *measurev1.TestSpec) *measurev1.TestSpec {
		t.Helper()
		n, err := testspec.Normalize(spec)
		if err != nil {
			t.Fatalf("Normalize(%v): %v", spec, err)
		}
		return n
	}
	accepts := func(spec *measurev1.TestSpec) bool { _, err := testspec.Normalize(spec); return err == nil }
	load := func(p *measurev1.HttpLoadParams) *measurev1.TestSpec {
		return &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD, Params: &measurev1.TestSpec_HttpLoad{HttpLoad: p}}
	}
	ping := norm(&measurev1.TestSpec{Test: measurev1.Test_TEST_PING}).GetPing()
	qperf := norm(&measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT}).GetQperf()
	iperf3 := norm(&measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP}).GetIperf3()
	ab := norm(load(nil)).GetHttpLoad()
	if qperf.GetDuration().AsDuration() != iperf3.GetDuration().AsDuration() {
		t.Fatalf("qperf's default duration %v is not iperf3's %v: --duration's help gives one", qperf.GetDuration().AsDuration(), iperf3.GetDuration().AsDuration())
	}
	for _, b := range []struct {
		name      string
		at, above *measurev1.TestSpec
	}{
		{"requests", load(&measurev1.HttpLoadParams{Requests: 1_000_000, Concurrency: 1}), load(&measurev1.HttpLoadParams{Requests: 1_000_001, Concurrency: 1})},
		{"concurrency", load(&measurev1.HttpLoadParams{Requests: 1000, Concurrency: 1000}), load(&measurev1.HttpLoadParams{Requests: 1001, Concurrency: 1001})},
		{"load timeout", load(&measurev1.HttpLoadParams{Timeout: durationpb.New(300 * time.Second)}), load(&measurev1.HttpLoadParams{Timeout: durationpb.New(301 * time.Second)})},
		{"load timeout low", load(&measurev1.HttpLoadParams{Timeout: durationpb.New(time.Second)}), load(&measurev1.HttpLoadParams{Timeout: durationpb.New(time.Second / 2)})},
	} {
		if !accepts(b.at) || accepts(b.above) {
			t.Errorf("%s: Normalize takes the bound the help gives %v, refuses past it %v; want true, false", b.name, accepts(b.at), accepts(b.above))
		}
	}
	flags := newTriggerCommand(&options{}).Flags()
	for _, tt := range []struct {
		flag, want string
	}{
		{"ping-count", fmt.Sprintf("(default %d)", ping.GetCount())},
		{"duration", fmt.Sprintf("(default %v)", qperf.GetDuration().AsDuration())},
		{"requests", fmt.Sprintf("(default %d, at most 1,000,000)", ab.GetRequests())},
		{"concurrency", fmt.Sprintf("(default %d, at most 1000 ", ab.GetConcurrency())},
		{"load-timeout", fmt.Sprintf("whole seconds 1s..300s; requests not done by then are failures (default %v)", ab.GetTimeout().AsDuration())},
		{"repeats", fmt.Sprintf("(default: %d for ping, %d for http, %d for qperf and iperf3)",
			schedule.DefaultRepeats(measurev1.Test_TEST_PING), schedule.DefaultRepeats(measurev1.Test_TEST_HTTP), schedule.DefaultRepeats(measurev1.Test_TEST_QPERF_TCP_LAT))},
	} {
		f := flags.Lookup(tt.flag)
		if f == nil {
			t.Errorf("no flag --%s", tt.flag)
			continue
		}
		if !strings.Contains(f.Usage, tt.want) {
			t.Errorf("--%s says %q; want it to say %q", tt.flag, f.Usage, tt.want)
		}
	}
	if d := schedule.DefaultRepeats(measurev1.Test_TEST_IPERF3_TCP); d != schedule.DefaultRepeats(measurev1.Test_TEST_QPERF_TCP_LAT) {
		t.Errorf("iperf3's default repeats %d is not qperf's: --repeats' help gives one", d)
	}
}
