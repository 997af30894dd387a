package cluster_test

import (
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestModesReportCompareAndPlot measures the same 3-node lab in host-gw and
// then in vxlan mode into one store, then checks that report, compare (both
// modes side by side, with significance) and plot work on those real runs.
func TestModesReportCompareAndPlot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	work := t.TempDir()
	var runs []string
	for _, mode := range []lab.Mode{lab.ModeHostGW, lab.ModeVXLAN} {
		e := startEnvIn(t, ctx, lab.Config{Nodes: 3, Mode: mode}, work)
		_, stderr, err := e.cli(ctx, "trigger", "--label", string(mode), "--tests", "ping,qperf_tcp_lat,iperf3_tcp",
			"--paths", "host-host,pod-pod", "--duration", "1s", "--ping-count", "3", "--msg-sizes", "64,64K", "--repeats", "1")
		if err != nil {
			t.Fatalf("%s: trigger: %v\n%s", mode, err, stderr)
		}
		stdout, _, err := e.cli(ctx, "runs", "-o", "json", "--limit", "1")
		if err != nil {
			t.Fatal(err)
		}
		var rs meshv1.ListRunsResponse
		decode(t, stdout, &rs)
		if len(rs.GetRuns()) != 1 || rs.GetRuns()[0].GetSpec().GetLabel() != string(mode) {
			t.Fatalf("%s: runs %v", mode, rs.GetRuns())
		}
		// 3 nodes, one direction: 3 rounds; both directions: 6.
		if got := rs.GetRuns()[0].GetRounds(); got != 6 {
			t.Errorf("%s: %d rounds, want 6", mode, got)
		}
		runs = append(runs, rs.GetRuns()[0].GetRunId())
		if mode == lab.ModeHostGW {
			if err := e.c.Stop(); err != nil {
				t.Fatal(err)
			}
			if err := lab.Down(ctx, e.lab.Prefix, nil); err != nil {
				t.Fatal(err)
			}
			continue
		}

		// report: matrices, overhead against host-host, a sentence per path.
		stdout, stderr, err = e.cli(ctx, "report", runs[1])
		if err != nil {
			t.Fatalf("report: %v\n%s", err, stderr)
		}
		for _, want := range []string{"iperf3_tcp P1, pod-pod", "SRC \\ DST", "against host->host", "pod->pod over vxlan: bandwidth"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("report lacks %q:\n%s", want, stdout)
			}
		}
		var rep struct {
			Cells []struct {
				Test   string   `json:"test"`
				N      int      `json:"n"`
				Median *float64 `json:"median"`
			} `json:"cells"`
			Summary []string `json:"summary"`
		}
		stdout, _, err = e.cli(ctx, "report", runs[1], "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("report -o json: %v\n%s", err, stdout)
		}
		// 6 pairs x 2 paths x (ping + qperf at 2 sizes + iperf3).
		if len(rep.Cells) != 6*2*4 || len(rep.Summary) != 1 {
			t.Errorf("report: %d cells and summary %q; want 48 and one sentence", len(rep.Cells), rep.Summary)
		}
		for _, c := range rep.Cells {
			if c.N != 1 || c.Median == nil || *c.Median <= 0 {
				t.Errorf("cell %+v: want one positive sample", c)
			}
		}

		// compare: both modes side by side, with a p-value per path.
		var cmp struct {
			Cells []struct {
				Test, Path string
				A          *struct{ N int } `json:"a"`
				B          *struct{ N int } `json:"b"`
				P          *float64         `json:"p_value"`
			} `json:"cells"`
		}
		stdout, stderr, err = e.cli(ctx, "compare", runs[0], runs[1], "--by", "path", "-o", "json")
		if err != nil {
			t.Fatalf("compare: %v\n%s", err, stderr)
		}
		if err := json.Unmarshal([]byte(stdout), &cmp); err != nil {
			t.Fatalf("compare -o json: %v\n%s", err, stdout)
		}
		if len(cmp.Cells) != 2*4 {
			t.Errorf("compare: %d cells, want 8 (2 paths x 4 tests)", len(cmp.Cells))
		}
		for _, c := range cmp.Cells {
			if c.A == nil || c.B == nil || c.A.N != 6 || c.B.N != 6 || c.P == nil {
				t.Errorf("compare cell %s %s: a %+v b %+v p %v; want both modes with 6 pairs and a p-value", c.Test, c.Path, c.A, c.B, c.P)
			}
		}
		stdout, _, err = e.cli(ctx, "compare", runs[0], runs[1], "--by", "path")
		if err != nil || !strings.Contains(stdout, "[host-gw]") || !strings.Contains(stdout, "[vxlan]") {
			t.Errorf("compare table (%v) does not name both modes:\n%s", err, stdout)
		}

		// plot: a PNG with a line per path.
		out := filepath.Join(t.TempDir(), "run.png")
		if _, stderr, err := e.cli(ctx, "plot", runs[1], "--out", out); err != nil {
			t.Fatalf("plot: %v\n%s", err, stderr)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("plot wrote no PNG: %v", err)
		}
		_ = f.Close()
	}
}
