package fleet_test

import (
	"os"
	"testing"

	"github.com/meshperf/meshperf/deploy/fleet"
)

// TestProcFigures reads this test process's own /proc figures: CPU time
// that grows with work done, a resident size within its peak, and an
// error naming the file for a process that does not exist.
func TestProcFigures(t *testing.T) {
	pid := os.Getpid()
	before, err := fleet.CPUSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 300_000_000 { // some CPU: well over a clock tick (10 ms)
		x ^= i
	}
	after, err := fleet.CPUSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !(after > before) || after > 1e6 {
		t.Errorf("CPU seconds %v then %v (x %d), want growth and seconds, not ticks", before, after, x)
	}
	rss, peak, err := fleet.RSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	// A Go test binary: MBs, not kB or bytes.
	if !(rss > 1 && rss < 4096 && peak >= rss) {
		t.Errorf("RSS %v MB, peak %v MB; want a few MB, the peak at least the RSS", rss, peak)
	}
	if _, err := fleet.CPUSeconds(1 << 30); err == nil {
		t.Error("CPUSeconds of no process: no error")
	}
}
