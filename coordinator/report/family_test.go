package report

import (
	"math"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestFamiliesSideBySide(t *testing.T) {
	v4, v6 := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6
	ping := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	pp := measurev1.Path_PATH_POD_TO_POD
	planned := []*measurev1.PlannedTest{
		{TestId: "t1", SrcNode: "a", DstNode: "b", Path: pp, Spec: ping, IpFamily: v4},
		{TestId: "t2", SrcNode: "a", DstNode: "b", Path: pp, Spec: ping, IpFamily: v6},
	}
	res := func(id string, fam measurev1.IPFamily, rtt float64) *measurev1.Result {
		return &measurev1.Result{TestId: id, SrcNode: "a", DstNode: "b", Path: pp, Spec: ping, IpFamily: fam, Status: measurev1.Status_STATUS_OK,
			Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 5, PacketsReceived: 5, RttAvgSeconds: rtt, RttMinSeconds: rtt, RttMaxSeconds: rtt}}}
	}
	// t1 stored before families: unset is IPv4.
	results := []*measurev1.Result{res("t1", measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, 0.001), res("t2", v6, 0.0015)}
	rows := Build(&measurev1.Run{Planned: planned}, results)
	if len(rows) != 2 || rows[0].Family != v4 || rows[1].Family != v6 || !rows[0].OK() || !rows[1].OK() {
		t.Fatalf("rows %+v, want an OK IPv4 row then an OK IPv6 row", rows)
	}
	if !RowsIPv6(rows) || RowsIPv6(rows[:1]) {
		t.Errorf("RowsIPv6 wrong")
	}
	if ok, total := Summary(rows); ok != 2 || total != 2 {
		t.Errorf("Summary = %d/%d, want 2/2: each family is its own pair-path", ok, total)
	}
	cells := testcell.Cells(results)
	if len(cells) != 2 || !testcell.AnyIPv6(cells) {
		t.Fatalf("cells %+v, want one per family", cells)
	}
	deltas := testcell.CompareFamilies(testcell.ByPath(cells))
	if len(deltas) != 1 || deltas[0].A.Family != v4 || deltas[0].B.Family != v6 {
		t.Fatalf("CompareFamilies = %+v, want IPv4 (A) against IPv6 (B)", deltas)
	}
	if got := deltas[0].MedianChange; math.Abs(got-0.5) > 1e-9 {
		t.Errorf("MedianChange = %v, want +0.5 (IPv6 RTT 1.5 ms against 1 ms)", got)
	}
	// An external test is planned without a family; its row is its
	// results' family (IPv6 here), not a missing IPv4 row.
	ext := &measurev1.PlannedTest{TestId: "t3", SrcNode: "a", DstNode: "lab-ext", Path: measurev1.Path_PATH_HOST_TO_EXTERNAL, Spec: ping}
	extRes := res("t3", v6, 0.001)
	extRes.DstNode, extRes.Path = "lab-ext", measurev1.Path_PATH_HOST_TO_EXTERNAL
	rows = Build(&measurev1.Run{Planned: []*measurev1.PlannedTest{ext}}, []*measurev1.Result{extRes})
	if len(rows) != 1 || rows[0].Family != v6 || !rows[0].OK() {
		t.Errorf("external rows %+v, want one OK IPv6 row", rows)
	}
	for _, m := range testcell.Matrices(cells) {
		if want := m.Family == v6; strings.HasSuffix(m.Title(), " ipv6") != want {
			t.Errorf("matrix title %q (family %v)", m.Title(), m.Family)
		}
	}
}
