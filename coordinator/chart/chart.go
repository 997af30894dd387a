// Package chart draws a run's figures with gonum/plot, as operators draw
// them with gnuplot today: one-way latency and bandwidth against the qperf
// message size with one line per path (the median over node pairs of each
// pair's median), and a node x node heatmap of one test on one path. The
// figures come from coordinator/report's cells; units are converted here,
// at the edge (µs, Gbit/s).
package chart

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrNothingToDraw means the cells hold no sample for any figure.
var ErrNothingToDraw = errors.New("nothing to draw")

// Options shape a chart.
type Options struct {
	// Title heads the figure, e.g. the run ID and label.
	Title string
	// HeatmapTest chooses the heatmap's test; unspecified means the first
	// bandwidth test of the run (iperf3 before qperf).
	HeatmapTest measurev1.Test
	// HeatmapPath chooses the heatmap's path; unspecified means pod-pod if
	// the run has it.
	HeatmapPath measurev1.Path
}

// Series is one line: a path's medians against the message size.
type Series struct {
	// Path is the line's path.
	Path measurev1.Path
	// Points are (message size in bytes, median in base units), sorted by size.
	Points []Point
}

// Point is one point of a Series.
type Point struct {
	// SizeBytes is the qperf message size.
	SizeBytes uint64
	// Value is the median over node pairs of each pair's median, in base
	// units (seconds or bits per second).
	Value float64
}

// SizeSeries returns, for qperf tests of one kind (latency when latency is
// true, else bandwidth), one Series per path. Tests without a message size
// (not qperf) are left out.
func SizeSeries(cells []*testcell.Cell, latency bool) []Series {
	byPath := map[measurev1.Path]map[uint64][]float64{}
	for _, c := range cells {
		if testspec.Tool(c.Test) != measurev1.Tool_TOOL_QPERF || testcell.HigherIsBetter(c.Test) == latency || len(c.Samples) == 0 {
			continue
		}
		size := c.MsgSizeBytes
		if size == 0 {
			continue
		}
		if byPath[c.Path] == nil {
			byPath[c.Path] = map[uint64][]float64{}
		}
		byPath[c.Path][size] = append(byPath[c.Path][size], c.Stats.Median)
	}
	var out []Series
	for path, bySize := range byPath {
		s := Series{Path: path}
		for size, meds := range bySize {
			sort.Float64s(meds)
			s.Points = append(s.Points, Point{SizeBytes: size, Value: stats.MedianSorted(meds)})
		}
		slices.SortFunc(s.Points, func(a, b Point) int { return int(int64(a.SizeBytes) - int64(b.SizeBytes)) })
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Series) int { return int(a.Path - b.Path) })
	return out
}

// Render draws the figure into out; the extension chooses the format
// (.png or .svg). Panels without data are left out; ErrNothingToDraw if
// none has data.
func Render(cells []*testcell.Cell, out string, opt Options) error {
	var panels []*plot.Plot
	if p, err := sizePlot(SizeSeries(cells, true), true); err == nil {
		panels = append(panels, p)
	}
	if p, err := sizePlot(SizeSeries(cells, false), false); err == nil {
		panels = append(panels, p)
	}
	if p, err := heatmap(cells, opt); err == nil {
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return fmt.Errorf("chart: %w: the run has no OK qperf or bandwidth results", ErrNothingToDraw)
	}
	if opt.Title != "" {
		panels[0].Title.Text = opt.Title + "\n" + panels[0].Title.Text
	}
	w, h := 7*vg.Inch, vg.Length(len(panels))*4*vg.Inch
	var canvas vg.CanvasWriterTo
	switch ext := strings.ToLower(filepath.Ext(out)); ext {
	case ".png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	case ".svg":
		canvas = vgsvg.New(w, h)
	default:
		return fmt.Errorf("chart: output %q: want a .png or .svg file", out)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter}
	for i, p := range panels {
		p.Draw(tiles.At(dc, 0, i))
	}
	return writeFile(out, canvas)
}

// sizePlot is latency (µs) or bandwidth (Gbit/s) against message size,
// one line per path, message size on a log2 axis.
func sizePlot(series []Series, latency bool) (*plot.Plot, error) {
	if len(series) == 0 {
		return nil, ErrNothingToDraw
	}
	p := plot.New()
	p.X.Label.Text = "message size (bytes, log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	scale := 1e6
	p.Title.Text, p.Y.Label.Text = "qperf latency against message size (median over node pairs)", "one-way latency (µs)"
	if !latency {
		scale = 1e-9
		p.Title.Text, p.Y.Label.Text = "qperf bandwidth against message size (median over node pairs)", "bandwidth (Gbit/s)"
	}
	p.Legend.Top, p.Legend.Left = true, true
	for i, s := range series {
		xys := make(plotter.XYs, len(s.Points))
		for j, pt := range s.Points {
			xys[j] = plotter.XY{X: float64(pt.SizeBytes), Y: pt.Value * scale}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("chart: %w", err)
		}
		line.Color = plotutil.Color(i)
		points.Color, points.Shape = plotutil.Color(i), plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(testspec.PathName(s.Path), line, points)
	}
	p.Y.Min = 0
	return p, nil
}

// sizeTicks marks powers of two with byte units.
type sizeTicks struct{}

// Ticks returns a tick at every power of two in [min, max].
func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := 1.0; v <= hi*1.0001; v *= 2 {
		if v >= lo/1.0001 {
			ticks = append(ticks, plot.Tick{Value: v, Label: testcell.FormatBytes(uint64(v))})
		}
	}
	return ticks
}

// grid is a node x node matrix as plotter.GridXYZ.
type grid struct {
	nodes []string
	z     [][]float64 // [src][dst], NaN where absent
}

func (g grid) Dims() (c, r int)         { return len(g.nodes), len(g.nodes) }
func (g grid) Z(c, r int) float64       { return g.z[r][c] }
func (g grid) X(c int) float64          { return float64(c) }
func (g grid) Y(r int) float64          { return float64(r) }
func (g grid) bounds() (lo, hi float64) { return minMax(g.z) }

func minMax(z [][]float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, row := range z {
		for _, v := range row {
			if !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	return lo, hi
}

// heatmap draws the medians of one test on one path, source (rows) by
// destination (columns).
func heatmap(cells []*testcell.Cell, opt Options) (*plot.Plot, error) {
	m := pickMatrix(testcell.Matrices(cells), opt)
	if m == nil || len(m.Nodes) < 2 {
		return nil, ErrNothingToDraw
	}
	scale, unit := 1e-9, "Gbit/s"
	if !testcell.HigherIsBetter(m.Test) {
		scale, unit = 1e6, "µs"
	}
	g := grid{nodes: m.Nodes, z: make([][]float64, len(m.Nodes))}
	for i, src := range m.Nodes {
		g.z[i] = make([]float64, len(m.Nodes))
		for j, dst := range m.Nodes {
			g.z[i][j] = math.NaN()
			if c := m.Cells[src][dst]; c != nil && len(c.Samples) > 0 {
				g.z[i][j] = c.Stats.Median * scale
			}
		}
	}
	lo, hi := g.bounds()
	if math.IsInf(lo, 1) {
		return nil, ErrNothingToDraw
	}
	if lo == hi {
		lo, hi = lo*0.99, hi*1.01+1e-12
	}
	pal := moreland.SmoothBlueRed()
	pal.SetMin(lo)
	pal.SetMax(hi)
	hm := plotter.NewHeatMap(g, pal.Palette(64))
	hm.NaN = color.Gray{Y: 230}
	hm.Min, hm.Max = lo, hi
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s (median, %s; blue %.3g .. red %.3g)", m.Title(), unit, lo, hi)
	p.X.Label.Text, p.Y.Label.Text = "destination node", "source node"
	names := nodeTicks(m.Nodes)
	p.X.Tick.Marker, p.Y.Tick.Marker = names, names
	p.Add(hm)
	// Write each value in its square.
	labels := plotter.XYLabels{}
	for i := range m.Nodes {
		for j := range m.Nodes {
			if v := g.z[i][j]; !math.IsNaN(v) {
				labels.XYs = append(labels.XYs, plotter.XY{X: float64(j), Y: float64(i)})
				labels.Labels = append(labels.Labels, fmt.Sprintf("%.3g", v))
			}
		}
	}
	if len(labels.XYs) > 0 && len(m.Nodes) <= 12 {
		l, err := plotter.NewLabels(labels)
		if err == nil {
			p.Add(l)
		}
	}
	return p, nil
}

// nodeTicks names the rows and columns of the heatmap.
type nodeTicks []string

// Ticks returns one tick per node.
func (n nodeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for i, name := range n {
		if float64(i) >= lo-0.5 && float64(i) <= hi+0.5 {
			ticks = append(ticks, plot.Tick{Value: float64(i), Label: name})
		}
	}
	return ticks
}

// pickMatrix chooses the heatmap's matrix: the one asked for (the largest
// qperf message size of it), or the first bandwidth test on pod-pod, else
// the first bandwidth test, else the first matrix; iperf3 before qperf,
// and of qperf the largest message size.
func pickMatrix(ms []*testcell.Matrix, opt Options) *testcell.Matrix {
	var firstBW, podBW *testcell.Matrix
	ms = slices.Clone(ms)
	slices.SortStableFunc(ms, func(a, b *testcell.Matrix) int {
		ai, bi := testspec.Tool(a.Test) == measurev1.Tool_TOOL_IPERF3, testspec.Tool(b.Test) == measurev1.Tool_TOOL_IPERF3
		switch {
		case ai != bi && ai:
			return -1
		case ai != bi:
			return 1
		}
		return -cmp.Compare(a.MsgSizeBytes, b.MsgSizeBytes)
	})
	for _, m := range ms {
		if opt.HeatmapTest != 0 || opt.HeatmapPath != 0 {
			if (opt.HeatmapTest == 0 || m.Test == opt.HeatmapTest) && (opt.HeatmapPath == 0 || m.Path == opt.HeatmapPath) {
				return m
			}
			continue
		}
		if testcell.HigherIsBetter(m.Test) {
			if firstBW == nil {
				firstBW = m
			}
			if podBW == nil && m.Path == measurev1.Path_PATH_POD_TO_POD {
				podBW = m
			}
		}
	}
	switch {
	case opt.HeatmapTest != 0 || opt.HeatmapPath != 0:
		return nil
	case podBW != nil:
		return podBW
	case firstBW != nil:
		return firstBW
	case len(ms) > 0:
		return ms[0]
	}
	return nil
}
