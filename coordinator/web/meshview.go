package web

import (
	"math"
	"strconv"

	"github.com/meshperf/meshperf/coordinator/diagnose"
)

// fig is a figure in base units that encodes as JSON with 4 significant
// digits, and as null when not finite (no figure).
type fig float64

// none is the fig of a cell without a figure.
var none = fig(math.NaN())

// MarshalJSON writes f with 4 significant digits, null when not finite.
func (f fig) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', 4, 64), nil
}

// figs encodes as a JSON array of figs in one pass (a mesh of 300 nodes
// has 90,000 per array).
type figs []fig

// MarshalJSON writes the array.
func (fs figs) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 8*len(fs)+2)
	b = append(b, '[')
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		v := float64(f)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, v, 'g', 4, 64)
	}
	return append(b, ']'), nil
}

// Cell states in meshView.State, one byte per cell.
const (
	stateOK       = 'o'
	stateDegraded = 'd'
	stateFail     = 'f'
	stateNone     = 'n'
	stateSelf     = 's'
)

// meshView is the mesh API's answer: compact at 300 nodes (90,000 pairs)
// with the node names once and flat row-major arrays of n*n entries,
// index src*n + dst in Nodes' order.
type meshView struct {
	// Test, Params and Path name the matrix (Params the short form of
	// the test's parameters, testcell.Cell.Label: "" for the defaults);
	// Baseline is the path its cells compare with (host-host).
	Test, Params, Path, Baseline string
	// RunID, Label and EndTime (RFC 3339) are the run shown; "" when none.
	RunID, Label, EndTime string
	// Unit is the figures' base unit ("s" or "bit/s").
	Unit string
	// HigherIsBetter is true for throughput.
	HigherIsBetter bool
	// Tests and Paths are the choices that have data.
	Tests, Paths []string
	// Nodes are in display order: nodes with most bad cells first, then
	// by name.
	Nodes []string
	// TotalNodes is how many nodes the probe period or the run has: more
	// than Nodes when it has more than MaxMeshNodes (worstNodes).
	TotalNodes int
	// State is n*n bytes: o ok, d degraded, f fail, n none, s self.
	State string
	// Value, Base and Loss are n*n: the pair's median, its baseline's
	// median, its loss ratio 0..1 (ping); null when none.
	Value, Base, Loss figs
	// Median is the median of Value over the matrix.
	Median fig
	// DegradedRatio is DegradedRatio, DegradedFloor DegradedFloorSeconds.
	DegradedRatio, DegradedFloor float64
	// RefreshSeconds is how often the page polls.
	RefreshSeconds float64
	// Findings are diagnose's findings of the run.
	Findings []diagnose.Finding
}

// MarshalJSON uses short lower-case keys.
func (m *meshView) MarshalJSON() ([]byte, error) {
	type out struct {
		Test           string             `json:"test"`
		Params         string             `json:"params"`
		Path           string             `json:"path"`
		Baseline       string             `json:"baseline"`
		RunID          string             `json:"run_id"`
		Label          string             `json:"label"`
		EndTime        string             `json:"end_time"`
		Unit           string             `json:"unit"`
		HigherIsBetter bool               `json:"higher_is_better"`
		Tests          []string           `json:"tests"`
		Paths          []string           `json:"paths"`
		Nodes          []string           `json:"nodes"`
		TotalNodes     int                `json:"total_nodes,omitempty"`
		State          string             `json:"state"`
		Value          figs               `json:"value"`
		Base           figs               `json:"base"`
		Loss           figs               `json:"loss"`
		Median         fig                `json:"median"`
		DegradedRatio  float64            `json:"degraded_ratio"`
		DegradedFloor  float64            `json:"degraded_floor_seconds"`
		RefreshSeconds float64            `json:"refresh_seconds"`
		Findings       []diagnose.Finding `json:"findings"`
	}
	return jsonMarshal(out(*m))
}
