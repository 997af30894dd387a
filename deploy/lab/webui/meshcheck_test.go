package webui

import (
	"strings"
	"testing"
)

// TestMeshChecks: the mesh checks TestWebUILab relies on accept a right
// mesh and name what is wrong in a wrong one.
func TestMeshChecks(t *testing.T) {
	nodes := []string{"node-1", "node-2", "node-3"}
	mesh := func(edit func(*meshDOM)) *meshDOM {
		m := &meshDOM{Rows: nodes, Self: 3, Legend: true}
		for _, s := range nodes {
			for _, d := range nodes {
				if s != d {
					m.Cells = append(m.Cells, meshCell{Src: s, Dst: d, State: "ok", Title: s + " → " + d + ": RTT 0.1 ms"})
				}
			}
		}
		if edit != nil {
			edit(m)
		}
		return m
	}
	fault := func(victim string) func(*meshDOM) {
		return func(m *meshDOM) {
			for i, c := range m.Cells {
				if c.Src == victim || c.Dst == victim {
					m.Cells[i].State = "fail"
				}
			}
		}
	}
	cases := []struct {
		name   string
		m      *meshDOM
		victim string
		want   string // in the problems; "" means none
	}{
		{"clean", mesh(nil), "", ""},
		{"fault", mesh(fault("node-3")), "node-3", ""},
		{"fault not shown", mesh(nil), "node-3", `node-1 -> node-3 is "ok", want fail`},
		{"fault on another node", mesh(fault("node-2")), "node-3", `node-1 -> node-2 is "fail", want ok`},
		{"a cell missing", mesh(func(m *meshDOM) { m.Cells = m.Cells[1:] }), "", "5 td.cell, want 6"},
		{"a cell twice", mesh(func(m *meshDOM) { m.Cells[1] = m.Cells[0] }), "", "twice"},
		{"a self cell as pair", mesh(func(m *meshDOM) { m.Cells[0].Dst = m.Cells[0].Src }), "", "not an ordered pair"},
		{"no self cells", mesh(func(m *meshDOM) { m.Self = 0 }), "", "0 td.self, want 3"},
		{"bad state", mesh(func(m *meshDOM) { m.Cells[2].State = "red" }), "", `data-state "red"`},
		{"row missing", mesh(func(m *meshDOM) { m.Rows = m.Rows[:2] }), "", "rows tr[data-node]"},
		{"no legend", mesh(func(m *meshDOM) { m.Legend = false }), "", "no #legend"},
		{"no figure", mesh(func(m *meshDOM) { m.Cells[0].Title = "node-1 → node-2: RTT" }), "", "gives no figure"},
		{"no unit", mesh(func(m *meshDOM) { m.Cells[0].Title = "node-1 → node-2: 0.12" }), "", "gives no figure"},
		{"microsecond noise", mesh(func(m *meshDOM) {
			m.Cells[0].State, m.Cells[0].Title = "degraded", "node-1 → node-2: RTT 147 µs (host-host 73.0 µs), loss 0 %, degraded"
		}), "", ""},
		{"degraded in ms", mesh(func(m *meshDOM) {
			m.Cells[0].State, m.Cells[0].Title = "degraded", "node-1 → node-2: RTT 14.7 ms (host-host 73.0 µs), loss 0 %, degraded"
		}), "", `node-1 -> node-2 is "degraded", want ok`},
		{"degraded on the faulty node", mesh(func(m *meshDOM) {
			fault("node-3")(m)
			m.Cells[1].State, m.Cells[1].Title = "degraded", "node-1 → node-3: RTT 147 µs (host-host 73.0 µs), loss 0 %, degraded"
		}), "node-3", `node-1 -> node-3 is "degraded", want fail`},
		{"throughput", mesh(func(m *meshDOM) { m.Cells[0].Title = "node-1 → node-2: throughput 9.80 Gbit/s" }), "", ""},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			states, _ := faultStates(tt.m, tt.victim)
			bad := append(checkMeshShape(tt.m, nodes), states...)
			got := strings.Join(bad, "\n")
			switch {
			case tt.want == "" && len(bad) > 0:
				t.Errorf("problems %q, want none", bad)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("problems %q, want one with %q", bad, tt.want)
			}
		})
	}
}
