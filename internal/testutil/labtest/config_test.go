package labtest

import (
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/config"
)

// TestLightMeshConfig: the config is one the coordinator takes, with the
// light mesh every 10 s and the probe interval and repeats asked for.
func TestLightMeshConfig(t *testing.T) {
	tests := []struct {
		repeats uint32
		probe   time.Duration
	}{{0, time.Second}, {1, 2 * time.Second}}
	for _, tt := range tests {
		s, err := config.Parse([]byte(LightMeshConfig(tt.repeats, tt.probe)))
		if err != nil {
			t.Fatalf("LightMeshConfig(%d, %v): %v", tt.repeats, tt.probe, err)
		}
		if len(s.Plans) != 1 || s.Plans[0].Name != "light" || s.Plans[0].Interval != 10*time.Second {
			t.Fatalf("plans %+v, want one light plan every 10s", s.Plans)
		}
		if got := s.Plans[0].Spec.GetRepeats(); got != tt.repeats {
			t.Errorf("repeats %d, want %d", got, tt.repeats)
		}
		if got := s.Probes.GetInterval().AsDuration(); got != tt.probe {
			t.Errorf("probe interval %v, want %v", got, tt.probe)
		}
	}
}
