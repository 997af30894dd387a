package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// File is the coordinator's config file (YAML), e.g.
//
//	external:                 # targets outside the mesh that runs may name
//	  - name: ingress         # a DNS-1123 label; results carry it as dst_node
//	    address: 203.0.113.10 # an IP or a DNS name (each agent resolves it)
//	    http_url: http://203.0.113.10/healthz # optional: the HTTP test
//	    iperf3_port: 5201     # optional: an iperf3 server behind it
//	    qperf_port: 19765     # optional, with qperf_data_port: a qperf
//	    qperf_data_port: 19766 #  server (qperf -lp 19765) behind it
//	  - name: other-cluster
//	    address: node-1.other.example.com     # ping only
//	node_cidrs: [10.0.0.0/16]   # host IPs the agents may register (none: any)
//	pod_cidrs: [10.244.0.0/16]  # pod IPs (none: any)
//	service_cidrs: [10.96.0.0/12] # service IPs (none: any)
//	monitor:
//	  light:                  # every 30 s, each tick moved by up to +-5 s
//	    interval: 30s
//	    jitter: 5s
//	    tests: [ping, qperf_tcp_lat]
//	    paths: [host-host, pod-pod, pod-service, host-external, pod-external]
//	    external_targets: [ingress, other-cluster]
//	    duration: 1s          # qperf/iperf3 measuring time
//	  bandwidth:              # a bandwidth mesh every 6 h
//	    interval: 6h
//	    tests: [iperf3_tcp, qperf_tcp_bw]
//	    paths: [host-host, pod-pod]
//	    sweep: true           # qperf message sizes 64 B .. 64 KiB
type File struct {
	// External is the allowlist of external targets: the only ones a run
	// may name, sent to every agent; at most protocol.MaxExternalTargets,
	// names unique.
	External []External `json:"external"`
	// Monitor holds the continuous schedules.
	Monitor struct {
		// Light is the frequent latency mesh; absent means none.
		Light *Schedule `json:"light"`
		// Bandwidth is the rare bandwidth mesh; absent means none.
		Bandwidth *Schedule `json:"bandwidth"`
	} `json:"monitor"`
	// Probes is the continuous in-process mesh of the agents; absent means
	// none.
	Probes *Probes `json:"probes"`
	// NodeCIDRs are the prefixes (such as 10.0.0.0/16) the agents' host
	// IPs must be in (registry.AddressPolicy); empty means any address.
	NodeCIDRs []string `json:"node_cidrs"`
	// PodCIDRs are the prefixes the agents' pod IPs must be in; empty
	// means any address.
	PodCIDRs []string `json:"pod_cidrs"`
	// ServiceCIDRs are the prefixes the nodes' service IPs (ClusterIPs)
	// must be in; empty means any address.
	ServiceCIDRs []string `json:"service_cidrs"`
}

// External is one external target of the allowlist (see
// protocol.ValidateExternalTarget for the rules).
type External struct {
	// Name is a DNS-1123 label that runs name the target by; results carry
	// it as their dst_node, so it must not be a node's name.
	Name string `json:"name"`
	// Address is an IP address or a DNS name, which each agent resolves
	// itself; ping goes to it.
	Address string `json:"address"`
	// HTTPURL is what the HTTP test fetches: an http or https URL whose
	// host is Address; empty means ping only.
	HTTPURL string `json:"http_url"`
	// Iperf3Port is the TCP port of an iperf3 server (iperf3 -s -p PORT)
	// behind Address, e.g. a DaemonSet behind a LoadBalancer; 0 means
	// none, and no iperf3 test runs against the target. One client at a
	// time: runs serialize their iperf3 tests to the target.
	Iperf3Port uint32 `json:"iperf3_port"`
	// QperfPort is the listen port of a qperf server (qperf -lp PORT)
	// behind Address, and QperfDataPort the data port its clients pin
	// (-ip), which the LoadBalancer must forward too (TCP and UDP); both
	// or neither, 0 meaning none, and distinct from each other and from
	// Iperf3Port.
	QperfPort uint32 `json:"qperf_port"`
	// QperfDataPort: see QperfPort.
	QperfDataPort uint32 `json:"qperf_data_port"`
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
	// ExternalTargets names targets of the external list to measure from
	// every node; with Paths, those must include host-external or
	// pod-external; without, both external paths run besides the default
	// ones.
	ExternalTargets []string `json:"external_targets"`
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

// Settings is a checked config file.
type Settings struct {
	// Plans are the continuous schedules, light first; none means
	// on-demand runs only.
	Plans []Plan
	// External is the allowlist of external targets in file order; nil
	// means none.
	External []*agentv1.ExternalTarget
	// Probes are the settings of the agents' continuous probes (the probes
	// section); nil means none.
	Probes *agentv1.ProbeSettings
	// NodeCIDRs, PodCIDRs and ServiceCIDRs are the checked node_cidrs,
	// pod_cidrs and service_cidrs; nil means any address.
	NodeCIDRs, PodCIDRs, ServiceCIDRs []netip.Prefix
}

// Load reads and checks a config file; an empty path means no file (no
// continuous schedules, no external targets).
func Load(path string) (Settings, error) {
	if path == "" {
		return Settings{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Settings{}, fmt.Errorf("config: %w", err)
	}
	return Parse(b)
}

// Parse checks a config file's content (YAML or JSON; unknown fields and
// repeated keys are refused, so a typo is not silently ignored, and so is
// a value of the wrong YAML type: `name: yes` is a boolean, not the string
// "yes", nor "true" as a conversion would make it; quote it). Errors wrap
// ErrConfig.
func Parse(b []byte) (Settings, error) {
	var f File
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return Settings{}, fmt.Errorf("%w: %v", ErrConfig, err) //nolint:errorlint // the sentinel decides errors.Is; the cause is text only
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Settings{}, fmt.Errorf("%w: %s", ErrConfig, decodeError(err))
	}
	var out Settings
	ext, err := external(f.External)
	if err != nil {
		return Settings{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	out.External = ext
	for _, s := range []struct {
		name string
		sch  *Schedule
	}{{"light", f.Monitor.Light}, {"bandwidth", f.Monitor.Bandwidth}} {
		if s.sch == nil {
			continue
		}
		p, err := s.sch.plan(s.name, ext)
		if err != nil {
			return Settings{}, fmt.Errorf("%w: monitor.%s.%w", ErrConfig, s.name, err)
		}
		out.Plans = append(out.Plans, p)
	}
	for _, c := range []struct {
		name string
		list []string
		out  *[]netip.Prefix
	}{{"node_cidrs", f.NodeCIDRs, &out.NodeCIDRs}, {"pod_cidrs", f.PodCIDRs, &out.PodCIDRs}, {"service_cidrs", f.ServiceCIDRs, &out.ServiceCIDRs}} {
		if *c.out, err = cidrs(c.name, c.list); err != nil {
			return Settings{}, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if f.Probes != nil {
		if out.Probes, err = f.Probes.settings(); err != nil {
			return Settings{}, fmt.Errorf("%w: probes.%w", ErrConfig, err)
		}
	}
	return out, nil
}

// external checks the external list: each entry valid, names unique, at
// most protocol.MaxExternalTargets.
func external(list []External) ([]*agentv1.ExternalTarget, error) {
	if len(list) > protocol.MaxExternalTargets {
		return nil, fmt.Errorf("external: %d targets, at most %d", len(list), protocol.MaxExternalTargets)
	}
	var out []*agentv1.ExternalTarget
	for i, e := range list {
		t := &agentv1.ExternalTarget{Name: e.Name, Address: e.Address, HttpUrl: e.HTTPURL,
			Iperf3Port: e.Iperf3Port, QperfPort: e.QperfPort, QperfDataPort: e.QperfDataPort}
		if err := protocol.ValidateExternalTarget(t); err != nil {
			return nil, fmt.Errorf("external[%d].%s: %w", i, externalField(err), err)
		}
		for j, prev := range out {
			if prev.GetName() == t.GetName() {
				return nil, fmt.Errorf("external[%d].name %q: already the name of external[%d]", i, t.GetName(), j)
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// externalField names the field ValidateExternalTarget refused, from its
// message (it names the field and value).
func externalField(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, `": `); ok {
		for _, f := range []string{"iperf3_port", "qperf_port", "qperf_data_port"} {
			if strings.HasPrefix(rest, f+" ") {
				return f
			}
		}
	}
	switch {
	case strings.Contains(msg, ": http_url "):
		return "http_url"
	case strings.Contains(msg, ": address: "):
		return "address"
	}
	return "name"
}

func (s *Schedule) plan(name string, ext []*agentv1.ExternalTarget) (Plan, error) {
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
			return Plan{}, fmt.Errorf("duration %q: %w", s.Duration, err)
		}
		dur = durationpb.New(d)
	}
	for i, name := range s.Tests {
		t, err := testspec.ParseTest(name)
		if err != nil {
			return Plan{}, fmt.Errorf("tests[%d]: %w", i, err)
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
			return Plan{}, fmt.Errorf("tests[%d] %s: %w", i, name, err)
		}
		p.Spec.Tests = append(p.Spec.Tests, ts)
	}
	for i, name := range s.Paths {
		path, err := testspec.ParsePath(name)
		if err != nil {
			return Plan{}, fmt.Errorf("paths[%d]: %w", i, err)
		}
		p.Spec.Paths = append(p.Spec.Paths, path)
	}
	if err := s.externalTargets(p.Spec, ext); err != nil {
		return Plan{}, err
	}
	// What Plan would refuse at every tick is refused now: a probe mesh of
	// two nodes whose names no target can have.
	probe := []string{" a", " b"}
	if _, err := schedule.Plan(p.Spec, schedule.Nodes{Mesh: probe, Targetable: probe, External: ext}); err != nil {
		return Plan{}, fmt.Errorf("tests and paths: %w", err)
	}
	return p, nil
}

// externalTargets checks the schedule's external_targets against the
// external list and the paths, and puts them in spec.
func (s *Schedule) externalTargets(spec *measurev1.RunSpec, ext []*agentv1.ExternalTarget) error {
	for i, name := range s.ExternalTargets {
		switch {
		case !slices.ContainsFunc(ext, func(t *agentv1.ExternalTarget) bool { return t.GetName() == name }):
			return fmt.Errorf("external_targets[%d] %q: not in the external list", i, name)
		case slices.Index(s.ExternalTargets, name) < i:
			return fmt.Errorf("external_targets[%d] %q: listed twice", i, name)
		}
	}
	spec.ExternalTargets = slices.Clone(s.ExternalTargets)
	hasExt := slices.ContainsFunc(spec.GetPaths(), testspec.IsExternal)
	switch {
	case len(s.ExternalTargets) > 0 && len(spec.GetPaths()) > 0 && !hasExt:
		return fmt.Errorf("external_targets %v: paths has no host-external or pod-external", s.ExternalTargets)
	case len(s.ExternalTargets) == 0 && hasExt:
		return errors.New("paths: host-external and pod-external need external_targets")
	}
	return nil
}

// decodeError says what the JSON decoder found wrong in the YAML it was
// converted from, in the file's terms: the field path and what was given
// ("external.name: a YAML bool where a string is wanted; quote it"), or the
// unknown key, without the decoder's "json:" prefix.
func decodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: a YAML %s where a %s is wanted; quote it if it is meant as text", te.Field, te.Value, te.Type)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		msg += " (keys are case-sensitive; see the example in the package doc or the README)"
	}
	return msg
}
