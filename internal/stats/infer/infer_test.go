package infer

import (
	"errors"
	"math"
	"testing"

	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testutil"
)

// Expected values below were computed independently (by hand and with
// Python's statistics module; t quantiles from a printed Student t table),
// not with this package.
func TestSummarize(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		want    Summary
	}{
		{"textbook eight", []float64{9, 2, 4, 4, 5, 4, 7, 5}, Summary{
			N: 8, Min: 2, Q1: 4, Median: 4.5, Q3: 5.5, Max: 9, IQR: 1.5, Mean: 5, StdDev: 2.138089935299395,
			// t(0.975, 7) = 2.364624; half width 2.364624 x 2.138090 / sqrt(8) = 1.787488.
			HasCI: true, CILow: 3.212512, CIHigh: 6.787488,
		}},
		{"three RTTs in seconds", []float64{120e-6, 100e-6, 110e-6}, Summary{
			N: 3, Min: 100e-6, Q1: 105e-6, Median: 110e-6, Q3: 115e-6, Max: 120e-6, IQR: 10e-6, Mean: 110e-6, StdDev: 10e-6,
			// t(0.975, 2) = 4.302653; half width 4.302653 x 10e-6 / sqrt(3) = 24.84138e-6.
			HasCI: true, CILow: 85.15862e-6, CIHigh: 134.84138e-6,
		}},
		{"bandwidth in bit/s keeps precision", []float64{9.41e9, 9.43e9, 9.39e9, 9.41e9}, Summary{
			N: 4, Min: 9.39e9, Q1: 9.405e9, Median: 9.41e9, Q3: 9.415e9, Max: 9.43e9, IQR: 0.01e9, Mean: 9.41e9, StdDev: 16329931.6,
			// t(0.975, 3) = 3.182446; half width 3.182446 x 16329931.6 / 2 = 25984582.
			HasCI: true, CILow: 9384015418, CIHigh: 9435984582,
		}},
		{"one sample has no interval", []float64{42}, Summary{N: 1, Min: 42, Q1: 42, Median: 42, Q3: 42, Max: 42, Mean: 42}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Summarize(tt.samples)
			if err != nil {
				t.Fatal(err)
			}
			checks := []struct {
				field     string
				got, want float64
			}{
				{"N", float64(got.N), float64(tt.want.N)}, {"Min", got.Min, tt.want.Min}, {"Q1", got.Q1, tt.want.Q1},
				{"Median", got.Median, tt.want.Median}, {"Q3", got.Q3, tt.want.Q3}, {"Max", got.Max, tt.want.Max},
				{"IQR", got.IQR, tt.want.IQR}, {"Mean", got.Mean, tt.want.Mean}, {"StdDev", got.StdDev, tt.want.StdDev},
				{"CILow", got.CILow, tt.want.CILow}, {"CIHigh", got.CIHigh, tt.want.CIHigh},
			}
			for _, c := range checks {
				if !testutil.Near(c.got, c.want, 1e-6) {
					t.Errorf("%s = %.10g, want %.10g", c.field, c.got, c.want)
				}
			}
			if got.HasCI != tt.want.HasCI {
				t.Errorf("HasCI = %t, want %t", got.HasCI, tt.want.HasCI)
			}
		})
	}
}

func TestSummarizeRefuses(t *testing.T) {
	if _, err := Summarize(nil); !errors.Is(err, stats.ErrNoSamples) {
		t.Errorf("no samples: err = %v", err)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := Summarize([]float64{1, bad}); err == nil {
			t.Errorf("sample %v accepted", bad)
		}
	}
}

func TestWelch(t *testing.T) {
	// Welch's example 1 (Welch's t-test, Wikipedia): t = 2.46 for b over a,
	// df = 24.99, p = 0.021.
	a := []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4}
	b := []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4}
	tests := []struct {
		name            string
		a, b            []float64
		wantT, wantDF   float64
		wantP           float64
		wantSignificant bool
		wantChange      float64
	}{
		{"different", a, b, 2.455356, 24.988529, 0.021, true, 22.986667/20.82 - 1},
		{"same cell twice", a, a, 0, 28, 1, false, 0},
		{"no spread, equal", []float64{5, 5}, []float64{5, 5, 5}, 0, 3, 1, false, 0},
		{"no spread, different", []float64{5, 5}, []float64{6, 6}, 0, 2, 0, true, 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Welch(tt.a, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if !testutil.Near(got.T, tt.wantT, 1e-5) || !testutil.Near(got.DF, tt.wantDF, 1e-5) || math.Abs(got.P-tt.wantP) > 0.001 {
				t.Errorf("t = %.6f df = %.6f p = %.4f; want %.6f %.6f %.3f", got.T, got.DF, got.P, tt.wantT, tt.wantDF, tt.wantP)
			}
			if got.Significant != tt.wantSignificant || !testutil.Near(got.Change, tt.wantChange, 1e-5) {
				t.Errorf("significant %t change %.6f; want %t %.6f", got.Significant, got.Change, tt.wantSignificant, tt.wantChange)
			}
		})
	}
	if _, err := Welch([]float64{1}, b); !errors.Is(err, stats.ErrNoSamples) {
		t.Errorf("one sample: err = %v", err)
	}
}
