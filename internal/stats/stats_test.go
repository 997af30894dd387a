package stats

import (
	"errors"
	"math"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

func TestQuantile(t *testing.T) {
	s := []float64{15, 20, 35, 40, 50}
	for _, tt := range []struct{ q, want float64 }{
		{0, 15}, {0.25, 20}, {0.4, 29}, {0.5, 35}, {0.9, 46}, {1, 50},
	} {
		got, err := Quantile(s, tt.q)
		if err != nil || !testutil.Near(got, tt.want, 1e-12) {
			t.Errorf("Quantile(%v) = %v, %v; want %v", tt.q, got, err, tt.want)
		}
	}
}

func TestQuantileRefuses(t *testing.T) {
	if _, err := Quantile(nil, 0.5); !errors.Is(err, ErrNoSamples) {
		t.Errorf("no samples: err = %v", err)
	}
	if _, err := Quantile([]float64{1}, 1.5); err == nil {
		t.Error("q 1.5 accepted")
	}
}

// TestLossRatio: the lost share, exact for whole percentages; NaN where
// no loss can be read.
func TestLossRatio(t *testing.T) {
	for _, tt := range []struct {
		sent, received uint64
		want           float64
	}{
		{10, 10, 0}, {10, 0, 1}, {4, 3, 0.25}, {1000, 999, 0.001}, {3, 1, 2.0 / 3},
		{0, 0, math.NaN()}, {5, 6, math.NaN()},
	} {
		got := LossRatio(tt.sent, tt.received)
		if got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)) {
			t.Errorf("LossRatio(%d, %d) = %v, want %v", tt.sent, tt.received, got, tt.want)
		}
	}
}
