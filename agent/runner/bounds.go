package runner

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// Bounds beyond which a figure a tool printed is not a measurement but
// garbage, and the parse fails (PARSE_ERROR) rather than store it.
const (
	// maxTimeSeconds bounds a round trip, a latency and a jitter: 1 hour.
	maxTimeSeconds = 3600
	// maxCurlSeconds bounds curl's time_* figures: 1 day (the longest
	// http.timeout is 60 s).
	maxCurlSeconds = 86400
	// minIperf3Seconds is the shortest end-sum duration that may carry
	// bytes: 1 ms (iperf3 -t is at least 1 s).
	minIperf3Seconds = 1e-3
	// maxRateSkew bounds how far an iperf3 end sum's bits_per_second may be
	// from bytes x 8 / seconds, as a factor either way (3.12 computes the
	// one from the others: the real captures are within 1e-4).
	maxRateSkew = 2
)

// plainDecimalRE is a decimal as ping and curl print them: digits, an
// optional fraction, no sign, exponent, hex, underscore or space.
var plainDecimalRE = regexp.MustCompile(`^[0-9]+(?:\.[0-9]+)?$`)

// parsePlainDecimal parses s (plainDecimalRE) times 10^exp10, applied in
// decimal ("0.036", -3 is exactly the float64 nearest 36e-6). The caller
// checks the bounds.
func parsePlainDecimal(s string, exp10 int) (float64, error) {
	if !plainDecimalRE.MatchString(s) {
		return 0, fmt.Errorf("%q is not a plain decimal", s)
	}
	x, err := strconv.ParseFloat(s+"e"+strconv.Itoa(exp10), 64)
	if err != nil || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%s is out of range", abbrev(s))
	}
	return x, nil
}

// abbrev shortens a figure for a message: "99999999999999999999... (300
// bytes)".
func abbrev(s string) string {
	if len(s) <= 24 {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:20], len(s))
}
