package monitor

import (
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// File is the coordinator's config file (YAML), e.g.
//
//	monitor:
//	  light:                  # every 30 s, each tick moved by up to +-5 s
//	    interval: 30s
//	    jitter: 5s
//	    tests: [ping, qperf_tcp_lat]
//	    paths: [host-host, pod-pod, pod-service]
//	    duration: 1s          # qperf/iperf3 measuring time
//	  bandwidth:              # a bandwidth mesh every 6 h
//	    interval: 6h
//	    tests: [iperf3_tcp, qperf_tcp_bw]
//	    paths: [host-host, pod-pod]
//	    sweep: true           # qperf message sizes 64 B .. 64 KiB
type File struct {
	// Monitor holds the continuous schedules.
	Monitor struct {
		// Light is the frequent latency mesh; absent means none.
		Light *Schedule `json:"light"`
		// Bandwidth is the rare bandwidth mesh; absent means none.
		Bandwidth *Schedule `json:"bandwidth"`
	} `json:"monitor"`
}

// Schedule is one continuous mesh.
type Schedule struct {
	// Interval between runs, e.g. "30s" or "6h"; at least 5 s.
	Interval string `json:"interval"`
	// Jitter moves each tick by a random amount in [-Jitter, +Jitter] so
	// agents do not fire in step; "" means a sixth of Interval.
	Jitter string `json:"jitter"`
	// Tests are test names (coordinator trigger --tests).
	Tests []string `json:"tests"`
	// Paths are path names; empty means the default paths.
	Paths []string `json:"paths"`
	// Duration is the qperf and iperf3 measuring time; "" means the default.
	Duration string `json:"duration"`
	// Sweep runs qperf from 64 B to 64 KiB, doubling.
	Sweep bool `json:"sweep"`
	// Repeats is the number of samples per test; 0 means the defaults.
	Repeats uint32 `json:"repeats"`
}

// Plan is a parsed Schedule.
type Plan struct {
	// Name is "light" or "bandwidth"; the runs' label is "monitor-" + Name.
	Name string
	// Interval and Jitter are parsed.
	Interval, Jitter time.Duration
	// Spec is the run every tick triggers (over the default mesh).
	Spec *measurev1.RunSpec
}

// ErrConfig wraps every refusal of a config file; the message names the
// field and value.
var ErrConfig = errors.New("bad config")

// Load reads and checks a config file; an empty path means no file (no
// continuous schedules).
func Load(path string) ([]Plan, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(b)
}

// Parse checks a config file's content (YAML or JSON; unknown fields are
// refused, so a typo is not silently ignored).
func Parse(b []byte) ([]Plan, error) {
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var plans []Plan
	for _, s := range []struct {
		name string
		sch  *Schedule
	}{{"light", f.Monitor.Light}, {"bandwidth", f.Monitor.Bandwidth}} {
		if s.sch == nil {
			continue
		}
		p, err := s.sch.plan(s.name)
		if err != nil {
			return nil, fmt.Errorf("%w: monitor.%s.%w", ErrConfig, s.name, err)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

func (s *Schedule) plan(name string) (Plan, error) {
	p := Plan{Name: name}
	var err error
	if p.Interval, err = time.ParseDuration(s.Interval); err != nil || p.Interval < 5*time.Second {
		return Plan{}, fmt.Errorf("interval %q: want a duration of at least 5s", s.Interval)
	}
	p.Jitter = p.Interval / 6
	if s.Jitter != "" {
		if p.Jitter, err = time.ParseDuration(s.Jitter); err != nil || p.Jitter < 0 || p.Jitter >= p.Interval/2 {
			return Plan{}, fmt.Errorf("jitter %q: want a duration from 0 to less than half the interval", s.Jitter)
		}
	}
	if len(s.Tests) == 0 {
		return Plan{}, errors.New("tests: empty; name at least one test")
	}
	p.Spec = &measurev1.RunSpec{Label: "monitor-" + name, Repeats: s.Repeats}
	var dur *durationpb.Duration
	if s.Duration != "" {
		d, err := time.ParseDuration(s.Duration)
		if err != nil {
			return Plan{}, fmt.Errorf("duration %q: %v", s.Duration, err)
		}
		dur = durationpb.New(d)
	}
	for i, name := range s.Tests {
		t, err := testspec.ParseTest(name)
		if err != nil {
			return Plan{}, fmt.Errorf("tests[%d]: %v", i, err)
		}
		ts := &measurev1.TestSpec{Test: t}
		switch testspec.Tool(t) {
		case measurev1.Tool_TOOL_QPERF:
			qp := &measurev1.QperfParams{Duration: dur}
			if s.Sweep {
				for size := uint64(64); size <= 64<<10; size *= 2 {
					qp.MsgSizeBytes = append(qp.MsgSizeBytes, size)
				}
			}
			ts.Params = &measurev1.TestSpec_Qperf{Qperf: qp}
		case measurev1.Tool_TOOL_IPERF3:
			ts.Params = &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{Duration: dur}}
		}
		if _, err := testspec.Normalize(ts); err != nil {
			return Plan{}, fmt.Errorf("tests[%d] %s: %v", i, name, err)
		}
		p.Spec.Tests = append(p.Spec.Tests, ts)
	}
	for i, name := range s.Paths {
		path, err := testspec.ParsePath(name)
		if err != nil {
			return Plan{}, fmt.Errorf("paths[%d]: %v", i, err)
		}
		p.Spec.Paths = append(p.Spec.Paths, path)
	}
	return p, nil
}
