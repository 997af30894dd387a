package retention

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

var now = time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)

// rtt is an OK ping result with an average RTT of v seconds.
func rtt(run, id, src, dst string, start time.Time, v float64) *measurev1.Result {
	return &measurev1.Result{TestId: id, RunId: run, SrcNode: src, DstNode: dst, Path: measurev1.Path_PATH_HOST_TO_HOST,
		Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Status: measurev1.Status_STATUS_OK, StartTime: timestamppb.New(start),
		Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: v}}}
}

func TestPass(t *testing.T) {
	for _, tt := range []struct {
		name         string
		rollupCutoff time.Time
		points       int
	}{
		{"no series rollups: chunks deleted", time.Time{}, 0},
		{"series rolled up per hour", now.Add(-30 * 24 * time.Hour), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "db")})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			old := now.Add(-72 * time.Hour).Truncate(time.Hour) // an hour three days ago
			results := []*measurev1.Result{
				rtt("r1", "t1", "a", "b", old.Add(1*time.Minute), 100e-6),
				rtt("r1", "t2", "a", "b", old.Add(2*time.Minute), 300e-6),
				rtt("r1", "t3", "a", "b", old.Add(3*time.Minute), 200e-6),
				rtt("r1", "t4", "b", "a", old.Add(70*time.Minute), 50e-6), // the next hour
				rtt("r2", "t1", "a", "b", now.Add(-time.Hour), 150e-6),    // recent: kept
			}
			failed := rtt("r1", "t5", "a", "b", old.Add(4*time.Minute), 0)
			failed.Status, failed.Metrics, failed.Message = measurev1.Status_STATUS_TIMEOUT, nil, "timed out"
			results = append(results, failed)
			if err := st.AddResults(ctx, results); err != nil {
				t.Fatal(err)
			}
			for _, r := range []*measurev1.Run{
				{RunId: "r1", EndTime: timestamppb.New(old.Add(time.Hour))},
				{RunId: "r2", EndTime: timestamppb.New(now.Add(-time.Hour))},
			} {
				if err := st.CreateRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}

			// The continuous probes' series: a->b every 10 s for the old hour and
			// for the last hour; the old ones compacted into chunks, as the
			// coordinator does, the recent ones still in the head.
			var reports []series.Report
			for i, start := range []time.Time{old, now.Add(-time.Hour).Truncate(time.Hour)} {
				for j := range 360 {
					reports = append(reports, series.Report{Src: "a", Seq: uint64(i*360 + j + 1), Start: start.Add(time.Duration(j) * 10 * time.Second),
						Period: 10 * time.Second, Summaries: []series.Summary{{Dst: "b", Path: measurev1.Path_PATH_HOST_TO_HOST,
							Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 1, Received: 1, RTTMin: 90 * time.Microsecond,
							RTTMedian: 100 * time.Microsecond, RTTP90: 110 * time.Microsecond, RTTMax: 120 * time.Microsecond, Status: measurev1.Status_STATUS_OK}}})
				}
			}
			if _, err := st.AppendReports(ctx, reports); err != nil {
				t.Fatal(err)
			}
			if _, err := st.CompactSeries(ctx, now.Add(-24*time.Hour)); err != nil {
				t.Fatal(err)
			}

			c, err := Pass(ctx, st, now.Add(-24*time.Hour), tt.rollupCutoff)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Counts{Rolled: 5, Runs: 1, SeriesSamples: 360, SeriesRollupPoints: tt.points}); c != want {
				t.Errorf("pass %+v, want %+v", c, want)
			}
			key := series.Key{Src: "a", Dst: "b", Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP}
			samples, err := st.Series(ctx, key, time.Time{}, time.Time{})
			if err != nil || len(samples) != 360 || samples[0].Start.Before(now.Add(-24*time.Hour)) {
				t.Errorf("series left: %d samples from %v, %v; want the last hour's 360", len(samples), samples[0].Start, err)
			}
			left, _, err := st.ListResults(ctx, store.Filter{}, 0, "")
			if err != nil || len(left) != 1 || left[0].GetRunId() != "r2" {
				t.Errorf("results left: %v, %v; want only r2's", left, err)
			}
			if _, err := st.GetRun(ctx, "r1"); err == nil {
				t.Error("run r1 is still there")
			}
			rollups, _, err := st.ListRollups(ctx, store.Filter{}, 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(rollups) != 2 {
				t.Fatalf("%d rollups, want 2 (a->b one hour, b->a the next)", len(rollups))
			}
			ab := rollups[0]
			if ab.GetSrcNode() != "a" || !ab.GetHourStart().AsTime().Equal(old) || ab.GetSamples() != 3 ||
				ab.GetMinValue() != 100e-6 || ab.GetMedianValue() != 200e-6 || ab.GetMaxValue() != 300e-6 ||
				fmt.Sprint(ab.GetFailed()) != fmt.Sprint([]*measurev1.StatusCount{{Status: measurev1.Status_STATUS_TIMEOUT, Count: 1}}) {
				t.Errorf("a->b rollup %v", ab)
			}
			// A second pass finds nothing more.
			if c, err := Pass(ctx, st, now.Add(-24*time.Hour), tt.rollupCutoff); c != (Counts{}) || err != nil {
				t.Errorf("second pass: %+v, %v", c, err)
			}
			// The series' old hour as one point (with rollups), kept until its
			// day is past the rollup retention.
			points, err := st.SeriesRollups(ctx, key, time.Time{}, time.Time{})
			if err != nil || len(points) != tt.points {
				t.Fatalf("%d series rollups, %v; want %d", len(points), err, tt.points)
			}
			if tt.points == 0 {
				return
			}
			if p := points[0]; !p.Start.Equal(old) || p.Periods != 360 || p.Sent != 360 || p.Received != 360 || p.Failed != 0 ||
				p.RTTMin != 90*time.Microsecond || p.RTTMedian != 100*time.Microsecond || p.RTTP90 != 110*time.Microsecond || p.RTTMax != 120*time.Microsecond {
				t.Errorf("series rollup %+v", p)
			}
			if c, err := Pass(ctx, st, now.Add(-24*time.Hour), old.Add(48*time.Hour)); err != nil || c != (Counts{SeriesRollupsDeleted: 1}) {
				t.Errorf("pass past the rollup retention: %+v, %v", c, err)
			}
		})
	}
}

// With a retention, the file stops growing: a week of results written and
// rolled up hour by hour ends no bigger than after the first day.
func TestStoreSizeBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a week of results")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	start := now.Add(-7 * 24 * time.Hour)
	var sizeAfterDay int64
	for h := 0; h < 7*24; h++ {
		hour := start.Add(time.Duration(h) * time.Hour)
		var batch []*measurev1.Result
		for i := 0; i < 120; i++ { // 2 probes a minute on one pair
			batch = append(batch, rtt(fmt.Sprintf("run-%d", h), fmt.Sprintf("t%d", i), "a", "b", hour.Add(time.Duration(i)*30*time.Second), 1e-4))
		}
		if err := st.AddResults(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if _, err := Pass(ctx, st, hour.Add(-6*time.Hour), hour.Add(-72*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if h == 24 {
			if sizeAfterDay, err = st.Size(); err != nil {
				t.Fatal(err)
			}
		}
	}
	size, err := st.Size()
	if err != nil {
		t.Fatal(err)
	}
	// Rollups add ~100 bytes an hour; raw results stay at 6 hours' worth.
	if size > sizeAfterDay*2 {
		t.Errorf("store grew from %d bytes after a day to %d after a week", sizeAfterDay, size)
	}
}

func TestRunRefusesShortRollupRetention(t *testing.T) {
	for _, tt := range []struct {
		name    string
		rollups time.Duration
	}{
		{"shorter than the retention", 24 * time.Hour},
		{"negative", -time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(t.Context(), Config{Retention: 48 * time.Hour, SeriesRollupRetention: tt.rollups})
			if err == nil || !strings.Contains(err.Error(), "series rollup retention") {
				t.Errorf("err = %v, want one naming the series rollup retention", err)
			}
		})
	}
}
