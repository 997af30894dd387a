package runs

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// startSlack is how long before its dispatch a result's start time may
// be: the clocks of the coordinator and the agent differ a little.
const startSlack = 5 * time.Second

// sanitize makes an agent's answer a well-formed set of results for pt,
// dispatched at start: the identity fields are the coordinator's, there is
// one result per expected sample (an answer with more than one result
// over that is refused whole, one extra is dropped, missing ones failed),
// indexes are positions, the spec is the planned one (a qperf result keeps
// the one message size the agent gives it when it is one of the planned
// sizes, and is STATUS_INVALID otherwise), no unknown protobuf field
// survives, every result has a start time in [start - startSlack, start +
// the test's timeout] (start when the agent gave none or another), and a
// result whose metrics do not fit its test or its status becomes a
// PARSE_ERROR. Nothing the agent says can overwrite another test's results.
func sanitize(runID string, pt *measurev1.PlannedTest, results []*measurev1.Result, start time.Time) []*measurev1.Result {
	want := max(len(pt.GetSpec().GetQperf().GetMsgSizeBytes()), 1)
	if len(results) > want+1 {
		results = []*measurev1.Result{{Status: measurev1.Status_STATUS_PARSE_ERROR,
			Message: fmt.Sprintf("the agent returned %d results; at most %d accepted, none stored", len(results), want+1)}}
	}
	if len(results) > want {
		results = results[:want]
	}
	for len(results) < want {
		results = append(results, &measurev1.Result{Status: measurev1.Status_STATUS_PARSE_ERROR,
			Message: fmt.Sprintf("the agent returned %d result(s); %d expected", len(results), want)})
	}
	latest := start.Add(sanity.Timeout(pt.GetSpec()))
	for i, r := range results {
		protocol.ClearUnknown(r)
		r.TestId, r.RunId, r.Index = pt.GetTestId(), runID, uint32(i)
		r.SrcNode, r.DstNode, r.Path = pt.GetSrcNode(), pt.GetDstNode(), pt.GetPath()
		spec, specErr := resultSpec(pt.GetSpec(), r.GetSpec())
		r.Spec = spec
		if ts := r.GetStartTime(); ts == nil || ts.CheckValid() != nil || ts.AsTime().Before(start.Add(-startSlack)) || ts.AsTime().After(latest) {
			r.StartTime = timestamppb.New(start)
		}
		if r.GetStatus() == measurev1.Status_STATUS_UNSPECIFIED {
			r.Status, r.Message = measurev1.Status_STATUS_PARSE_ERROR, "the agent sent a result without a status"
		}
		famErr := checkFamily(pt, r)
		switch ok := r.GetStatus() == measurev1.Status_STATUS_OK; {
		case specErr != nil:
			r.Status, r.Message, r.Metrics, r.Elapsed = measurev1.Status_STATUS_INVALID, "the agent's result does not fit its planned test: "+specErr.Error(), nil, nil
		case famErr != nil:
			r.Status, r.Message, r.Metrics, r.Elapsed = measurev1.Status_STATUS_INVALID, "the agent's result does not fit its planned test: "+famErr.Error(), nil, nil
		case ok && !metricsFit(r):
			r.Status = measurev1.Status_STATUS_PARSE_ERROR
			r.Message = fmt.Sprintf("the agent sent %T metrics for a %s test", r.GetMetrics(), testspec.Name(pt.GetSpec().GetTest()))
			r.Metrics = nil
		case !ok:
			r.Metrics = nil
		}
	}
	return results
}

// checkFamily sets r's ip_family to the coordinator's word: the planned
// test's family, or, for a test planned without one, the family of the
// target address (unspecified when that is no IP address: an external
// target the agent could not resolve). The agent's own ip_family is
// never taken. It returns an error when the target address the agent
// reports is of another family than the planned one, or is neither empty
// nor an IP address without zone or IPv4 mapping (then it is cleared).
func checkFamily(pt *measurev1.PlannedTest, r *measurev1.Result) error {
	var addrFam measurev1.IPFamily
	if s := r.GetTargetAddress(); s != "" {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.Is4In6() {
			r.TargetAddress = "" // never stored: any text, any length
			return fmt.Errorf("target_address %.64q is not an IP address without zone or IPv4 mapping", s)
		}
		addrFam = protocol.FamilyOf(a)
	}
	want := pt.GetIpFamily()
	if want == measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
		r.IpFamily = addrFam
		return nil
	}
	r.IpFamily = want
	if addrFam != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED && addrFam != want {
		return fmt.Errorf("target_address %.64q is %s, the test is planned in %s", r.GetTargetAddress(), protocol.FamilyName(addrFam), protocol.FamilyName(want))
	}
	return nil
}

// resultSpec is the spec to store with a result of the planned spec
// planned whose agent said got: planned itself, but for a qperf test
// with the one message size got names (one result per size), which must
// be one of planned's. A got of another test, or without a size, is
// ignored.
func resultSpec(planned, got *measurev1.TestSpec) (*measurev1.TestSpec, error) {
	sizes := planned.GetQperf().GetMsgSizeBytes()
	gotSizes := got.GetQperf().GetMsgSizeBytes()
	if len(sizes) == 0 || got.GetTest() != planned.GetTest() || len(gotSizes) == 0 {
		return planned, nil
	}
	if len(gotSizes) != 1 || !slices.Contains(sizes, gotSizes[0]) {
		shown := gotSizes
		if len(shown) > 4 {
			shown = shown[:4]
		}
		return planned, fmt.Errorf("spec.qperf.msg_size_bytes %v (%d sizes) is not one of the planned sizes %v", shown, len(gotSizes), sizes)
	}
	one := proto.CloneOf(planned)
	one.GetQperf().MsgSizeBytes = []uint64{gotSizes[0]}
	return one, nil
}
