package runner

import (
	"os"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/coordinator/sanity"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestGoldenPassSanity runs every OK result of the goldens under testdata
// through the coordinator's figure checks with its capture's spec: the
// checks must never refuse what a real (or derived but accepted) tool
// output parses to.
func TestGoldenPassSanity(t *testing.T) {
	checked := 0
	for _, path := range captureFiles(t) {
		c := readCapture(t, path)
		data, err := os.ReadFile(strings.TrimSuffix(path, ".txt") + ".golden.json")
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range unmarshalResults(t, data) {
			if r.GetStatus() != measurev1.Status_STATUS_OK {
				continue
			}
			if r.GetSpec() == nil {
				r.Spec = c.spec
			}
			checked++
			if err := sanity.CheckResult(r, sanity.Timeout(c.spec)); err != nil {
				t.Errorf("%s: result %d: %v", path, i, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no OK golden result checked")
	}
	t.Logf("%d OK golden results checked", checked)
}
