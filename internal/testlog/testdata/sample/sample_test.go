// Package sample is internal/testlog's TestFilterRealGoTest's input: one
// test of each outcome the filter tells apart. It is under testdata, so
// go test ./... never runs it; its tests fail only when
// MESHPERF_TESTLOG_SAMPLE=1 says the filter's test runs them.
package sample

import (
	"os"
	"testing"

	"github.com/meshperf/meshperf/internal/testskip"
)

func TestPasses(t *testing.T) {
	t.Log("passing chatter")
}

func TestByDesign(t *testing.T) {
	if os.Getenv("MESHPERF_SAMPLE_ALONE") == "" {
		t.Skip("runs alone: set MESHPERF_SAMPLE_ALONE=1")
	}
}

func TestNeedsTool(t *testing.T) {
	testskip.Tools(t, "the sample's hint", "meshperf-no-such-tool")
}

func TestFails(t *testing.T) {
	if os.Getenv("MESHPERF_TESTLOG_SAMPLE") == "" {
		return
	}
	t.Run("sub", func(t *testing.T) { t.Log("subtest chatter") })
	t.Log("more")
	t.Error("the failure's own words")
}
