package schedule

import (
	"errors"
	"fmt"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestPlanFamilies(t *testing.T) {
	v4, v6 := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6
	dual := []measurev1.IPFamily{v4, v6}
	fams := map[string][]measurev1.IPFamily{"d1": dual, "d2": dual, "four": {v4}, "six": {v6}}
	nodes := func(names ...string) Nodes {
		n := all(names)
		n.Families = func(node string) []measurev1.IPFamily { return fams[node] }
		return n
	}
	one := []*measurev1.TestSpec{{Test: measurev1.Test_TEST_HTTP}}
	hostHost := []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}
	tests := []struct {
		name  string
		spec  *measurev1.RunSpec
		nodes Nodes
		want  string // the planned tests' "src>dst family", in order
	}{
		{"no families known: as before", &measurev1.RunSpec{Repeats: 1, Tests: one, Paths: hostHost}, all([]string{"d1", "d2"}),
			"d1>d2 IP_FAMILY_UNSPECIFIED,d2>d1 IP_FAMILY_UNSPECIFIED"},
		{"dual pair: both families, IPv4 first", &measurev1.RunSpec{Repeats: 1, Tests: one, Paths: hostHost}, nodes("d1", "d2"),
			"d1>d2 IP_FAMILY_IPV4,d1>d2 IP_FAMILY_IPV6,d2>d1 IP_FAMILY_IPV4,d2>d1 IP_FAMILY_IPV6"},
		{"asked IPv6 only", &measurev1.RunSpec{Repeats: 1, Tests: one, Paths: hostHost, IpFamilies: []measurev1.IPFamily{v6}}, nodes("d1", "d2"),
			"d1>d2 IP_FAMILY_IPV6,d2>d1 IP_FAMILY_IPV6"},
		{"common families only", &measurev1.RunSpec{Repeats: 1, Tests: one, Paths: hostHost}, nodes("d1", "four"),
			"d1>four IP_FAMILY_IPV4,four>d1 IP_FAMILY_IPV4"},
		{"no common family: IPv4, to fail visibly", &measurev1.RunSpec{Repeats: 1, Tests: one, Paths: hostHost}, nodes("four", "six"),
			"four>six IP_FAMILY_IPV4,six>four IP_FAMILY_IPV4"},
		{"IPv6-only pair", &measurev1.RunSpec{Repeats: 1, Tests: one, Paths: hostHost}, nodes("six", "d1"),
			"six>d1 IP_FAMILY_IPV6,d1>six IP_FAMILY_IPV6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planned, err := Plan(tt.spec, tt.nodes)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for i, pt := range planned {
				if i > 0 {
					got += ","
				}
				got += fmt.Sprintf("%s>%s %v", pt.GetSrcNode(), pt.GetDstNode(), pt.GetIpFamily())
			}
			if got != tt.want {
				t.Errorf("planned\n %s\nwant\n %s", got, tt.want)
			}
		})
	}
	for _, bad := range [][]measurev1.IPFamily{{measurev1.IPFamily_IP_FAMILY_UNSPECIFIED}, {v4, v4}, {measurev1.IPFamily(7)}} {
		_, err := Plan(&measurev1.RunSpec{IpFamilies: bad}, nodes("d1", "d2"))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Plan(ip_families %v) = %v, want ErrInvalid", bad, err)
		}
	}
}
