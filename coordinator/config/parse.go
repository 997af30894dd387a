package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrConfig wraps every refusal of a config file; the message names the
// field and value.
var ErrConfig = errors.New("bad config")

// maxCIDRs bounds each CIDR list of the config file.
const maxCIDRs = 64

// Plan is a checked schedule of the monitor section.
type Plan struct {
	// Name is "light" or "bandwidth"; the runs' label is "monitor-" + Name.
	Name string
	// Interval is the time between ticks (at least 5 s) and Jitter the
	// most a tick moves either way (less than Interval/2; 0: none).
	Interval, Jitter time.Duration
	// Spec is the run every tick triggers (over the default mesh).
	Spec *measurev1.RunSpec
}

// Settings is a checked config file, defaults applied.
type Settings struct {
	// Plans are the continuous schedules, light first; none means
	// on-demand runs only.
	Plans []Plan
	// External is the allowlist of external targets in file order; nil
	// means none.
	External []*measurev1.ExternalTarget
	// Probes are the settings of the agents' continuous probes (the probes
	// section); nil means none.
	Probes *agentv1.ProbeSettings
	// NodeCIDRs, PodCIDRs and ServiceCIDRs are the checked node_cidrs,
	// pod_cidrs and service_cidrs; nil means any address.
	NodeCIDRs, PodCIDRs, ServiceCIDRs []netip.Prefix
}

// Load reads and checks a config file; an empty path means no file (no
// continuous schedules, no external targets). A file that cannot be read
// is an error that does not wrap ErrConfig.
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
// ErrConfig and name the key and value.
func Parse(b []byte) (Settings, error) {
	var f File
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return Settings{}, fmt.Errorf("%w: %v", ErrConfig, err) //nolint:errorlint // the sentinel decides errors.Is; the YAML cause is text only
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
func external(list []External) ([]*measurev1.ExternalTarget, error) {
	if len(list) > protocol.MaxExternalTargets {
		return nil, fmt.Errorf("external: %d targets, at most %d", len(list), protocol.MaxExternalTargets)
	}
	var out []*measurev1.ExternalTarget
	for i, e := range list {
		t := &measurev1.ExternalTarget{Name: e.Name, Address: e.Address, HttpUrl: e.HTTPURL,
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

// cidrs parses one CIDR list of the config file (node_cidrs, pod_cidrs or
// service_cidrs), named name: each entry a masked prefix such as
// 10.0.0.0/8 or fd00::/64. The error names the entry.
func cidrs(name string, list []string) ([]netip.Prefix, error) {
	if len(list) > maxCIDRs {
		return nil, fmt.Errorf("%s: %d prefixes, at most %d", name, len(list), maxCIDRs)
	}
	var out []netip.Prefix
	for i, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: not a CIDR prefix such as 10.0.0.0/8 or fd00::/64", name, i, s)
		}
		if err := registry.CheckCIDR(p); err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %w", name, i, s, err)
		}
		out = append(out, p)
	}
	return out, nil
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
		msg += " (keys are case-sensitive; see docs/config.md)"
	}
	return msg
}
