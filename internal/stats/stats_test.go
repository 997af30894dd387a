package stats

import (
	"errors"
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
