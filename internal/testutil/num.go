package testutil

import (
	"math"
	"time"
)

// Near reports whether a and b differ by at most rel relative to the
// larger of them; near zero (both below 1e-12 in magnitude) the bound is
// rel*1e-12, absolute.
func Near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Max(math.Abs(a), math.Abs(b)), 1e-12)
}

// Micros is n microseconds as a Duration, rounded toward zero to the
// nanosecond.
func Micros(n float64) time.Duration { return time.Duration(n * float64(time.Microsecond)) }
