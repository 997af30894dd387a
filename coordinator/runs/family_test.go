package runs

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/registry"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestRouteForFamilies(t *testing.T) {
	ip := netip.MustParseAddr
	v4, v6 := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6
	src := registry.Node{Name: "a", HostIP: ip("172.18.0.11"), PodIP: ip("10.244.1.2"), HostIPv6: ip("fd00:18::11"), PodIPv6: ip("fd00:10:244:1::2")}
	dst := registry.Node{Name: "b", HostIP: ip("172.18.0.12"), PodIP: ip("10.244.2.2"), ServiceIP: ip("10.96.0.12"),
		HostIPv6: ip("fd00:18::12"), PodIPv6: ip("fd00:10:244:2::2"), ServiceIPv6: ip("fd00:10:96::12")}
	only4 := registry.Node{Name: "c", HostIP: ip("172.18.0.13"), PodIP: ip("10.244.3.2"), ServiceIP: ip("10.96.0.13")}
	only6 := registry.Node{Name: "d", HostIP: ip("fd00:18::14"), PodIP: ip("fd00:10:244:4::2"), ServiceIP: ip("fd00:10:96::14")}
	tests := []struct {
		name     string
		path     measurev1.Path
		fam      measurev1.IPFamily
		src, dst registry.Node
		want     string
		wantErr  string
	}{
		{"v4 host-host", measurev1.Path_PATH_HOST_TO_HOST, v4, src, dst, "172.18.0.12", ""},
		{"v6 host-host", measurev1.Path_PATH_HOST_TO_HOST, v6, src, dst, "fd00:18::12", ""},
		{"v6 pod-pod", measurev1.Path_PATH_POD_TO_POD, v6, src, dst, "fd00:10:244:2::2", ""},
		{"v6 pod-service", measurev1.Path_PATH_POD_TO_SERVICE, v6, src, dst, "fd00:10:96::12", ""},
		{"v6 host-service", measurev1.Path_PATH_HOST_TO_SERVICE, v6, src, dst, "fd00:10:96::12", ""},
		{"v6 to an IPv4-only node", measurev1.Path_PATH_HOST_TO_POD, v6, src, only4, "", `node "c" registered no address in ipv6 for host-pod`},
		{"v6 from an IPv4-only node", measurev1.Path_PATH_HOST_TO_HOST, v6, only4, dst, "", `node "c" registered no host address in ipv6 to send from`},
		{"v6 on an IPv6-only node", measurev1.Path_PATH_POD_TO_SERVICE, v6, src, only6, "fd00:10:96::14", ""},
		{"v4 to an IPv6-only node", measurev1.Path_PATH_HOST_TO_HOST, v4, src, only6, "", `node "d" registered no address in ipv4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := routeFor(tt.path, tt.fam, tt.src, tt.dst)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("routeFor = %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.target.String() != tt.want {
				t.Errorf("routeFor = %+v, %v; want target %s", got, err, tt.want)
			}
		})
	}
}

func TestSanitizeFamily(t *testing.T) {
	v4, v6 := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6
	start := time.Now()
	tests := []struct {
		name       string
		planned    measurev1.IPFamily
		target     string
		agentFam   measurev1.IPFamily
		wantFam    measurev1.IPFamily
		wantStatus measurev1.Status
	}{
		{"v6 planned, v6 target", v6, "fd00:18::12", v6, v6, measurev1.Status_STATUS_TOOL_ERROR},
		{"v6 planned, v4 target", v6, "172.18.0.12", v6, v6, measurev1.Status_STATUS_INVALID},
		{"agent's family is not taken", v4, "172.18.0.12", v6, v4, measurev1.Status_STATUS_TOOL_ERROR},
		{"unplanned family: the address's", measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, "fd00:18::12", v4, v6, measurev1.Status_STATUS_TOOL_ERROR},
		{"unplanned family, no address", measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, "", v6, measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, measurev1.Status_STATUS_TOOL_ERROR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt := &measurev1.PlannedTest{TestId: "t00001", SrcNode: "a", DstNode: "b", Path: measurev1.Path_PATH_HOST_TO_HOST,
				Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}, IpFamily: tt.planned}
			in := []*measurev1.Result{{Status: measurev1.Status_STATUS_TOOL_ERROR, Message: "x", TargetAddress: tt.target, IpFamily: tt.agentFam}}
			got := sanitize("r", pt, in, start)
			if len(got) != 1 || got[0].GetIpFamily() != tt.wantFam || got[0].GetStatus() != tt.wantStatus {
				t.Errorf("sanitize = %v; want ip_family %v, status %v", got, tt.wantFam, tt.wantStatus)
			}
		})
	}
}
