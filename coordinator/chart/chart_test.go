package chart

import (
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// sweep is a qperf message-size sweep (64 B to 64 KiB, doubling) of
// tcp_lat and tcp_bw over three paths and two node pairs, plus iperf3.
func sweep() []*measurev1.Result {
	var rs []*measurev1.Result
	paths := map[measurev1.Path]float64{measurev1.Path_PATH_HOST_TO_HOST: 1, measurev1.Path_PATH_HOST_TO_POD: 1.1, measurev1.Path_PATH_POD_TO_POD: 1.5}
	for path, f := range paths {
		for _, pair := range [][2]string{{"node-1", "node-2"}, {"node-2", "node-1"}} {
			for size := uint64(64); size <= 64<<10; size *= 2 {
				spec := func(t measurev1.Test) *measurev1.TestSpec {
					return &measurev1.TestSpec{Test: t, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{size}}}}
				}
				rs = append(rs,
					&measurev1.Result{SrcNode: pair[0], DstNode: pair[1], Path: path, Status: measurev1.Status_STATUS_OK, Spec: spec(measurev1.Test_TEST_QPERF_TCP_LAT),
						Metrics: &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{MsgSizeBytes: size, LatencySeconds: f * (15e-6 + float64(size)*1e-10)}}},
					&measurev1.Result{SrcNode: pair[0], DstNode: pair[1], Path: path, Status: measurev1.Status_STATUS_OK, Spec: spec(measurev1.Test_TEST_QPERF_TCP_BW),
						Metrics: &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{MsgSizeBytes: size, ThroughputBps: float64(size) * 2e5 / f}}})
			}
			rs = append(rs, &measurev1.Result{SrcNode: pair[0], DstNode: pair[1], Path: path, Status: measurev1.Status_STATUS_OK,
				Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP}, Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 9e9 / f}}})
		}
	}
	return rs
}

func TestSizeSeries(t *testing.T) {
	cells := testcell.Cells(sweep())
	for _, latency := range []bool{true, false} {
		series := SizeSeries(cells, latency)
		if len(series) != 3 {
			t.Fatalf("latency=%t: %d lines, want one per path (3)", latency, len(series))
		}
		for _, s := range series {
			if len(s.Points) != 11 || s.Points[0].SizeBytes != 64 || s.Points[10].SizeBytes != 64<<10 {
				t.Errorf("latency=%t %v: points %v, want 64 B .. 64 KiB doubling", latency, s.Path, s.Points)
			}
		}
	}
}

func TestRender(t *testing.T) {
	dir := t.TempDir()
	cells := testcell.Cells(sweep())
	png1 := filepath.Join(dir, "run.png")
	if err := Render(cells, png1, Options{Title: "run X"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(png1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 1000 {
		t.Errorf("image %v too small for three panels", b)
	}
	svg := filepath.Join(dir, "run.svg")
	if err := Render(cells, svg, Options{HeatmapTest: measurev1.Test_TEST_IPERF3_TCP, HeatmapPath: measurev1.Path_PATH_HOST_TO_POD}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"host-host", "host-pod", "pod-pod", "iperf3_tcp, host-pod", "node-2"} {
		if !strings.Contains(string(b), want) {
			i := strings.Index(string(b), "iperf3")
			t.Errorf("SVG lacks %q (near: %.200q)", want, string(b)[max(i, 0):])
		}
	}
	if err := Render(nil, filepath.Join(dir, "x.png"), Options{}); !errors.Is(err, ErrNothingToDraw) {
		t.Errorf("no cells: err = %v, want ErrNothingToDraw", err)
	}
	if err := Render(cells, filepath.Join(dir, "x.gif"), Options{}); err == nil || !strings.Contains(err.Error(), ".png or .svg") {
		t.Errorf("a .gif: err = %v", err)
	}
}
