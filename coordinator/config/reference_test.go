package config

import (
	"bytes"
	"go/doc/comment"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testspec"
)

// TestReferenceUpToDate fails when docs/config.md is not what Reference
// renders from this package's source.
func TestReferenceUpToDate(t *testing.T) {
	want, err := Reference(".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", ReferencePath))
	if err != nil {
		t.Fatalf("%v: run `make config-docs` and commit %s", err, ReferencePath)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s is stale: run `make config-docs` and commit it; line %d is\n%q\nwant\n%q", ReferencePath, i+1, g, w)
			}
		}
	}
}

// jsonKeys are the key paths the decoder accepts in a value of type t
// under prefix, as referenceKeys spells them.
func jsonKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "" || key == "-" {
			continue
		}
		path := strings.TrimPrefix(prefix+"."+key, ".")
		out = append(out, path)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, jsonKeys(ft, path)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, jsonKeys(ft.Elem(), path+"[]")...)
		}
	}
	return out
}

// TestReferenceListsEveryKey: the reference documents exactly the keys the
// parser accepts.
func TestReferenceListsEveryKey(t *testing.T) {
	got, err := referenceKeys(".")
	if err != nil {
		t.Fatal(err)
	}
	want := jsonKeys(reflect.TypeFor[File](), "")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the reference's keys\n%v\nthe parser's\n%v", got, want)
	}
	for _, k := range []string{"external[].qperf_data_port", "monitor.light.external_targets", "monitor.bandwidth.sweep", "probes.ip_families", "service_cidrs"} {
		if !slices.Contains(want, k) {
			t.Errorf("the parser takes no %s", k)
		}
	}
}

// TestReferenceExample: the example of the package doc, which the
// reference shows, is a valid file with both schedules, targets and probes.
func TestReferenceExample(t *testing.T) {
	pkgDoc, _, err := readSections(".")
	if err != nil {
		t.Fatal(err)
	}
	var p comment.Parser
	var example string
	for _, b := range p.Parse(pkgDoc).Content {
		if c, ok := b.(*comment.Code); ok {
			example = c.Text
		}
	}
	s, err := Parse([]byte(example))
	if err != nil {
		t.Fatalf("the example: %v\n%s", err, example)
	}
	if len(s.Plans) != 2 || len(s.External) != 2 || s.Probes == nil || len(s.NodeCIDRs) != 1 {
		t.Errorf("the example's settings: %d plans, %d targets, probes %v, node_cidrs %v", len(s.Plans), len(s.External), s.Probes, s.NodeCIDRs)
	}
}

// TestDocumentedDefaults: the default tags of the probes section and of a
// schedule's duration are what the parser and the tests apply.
func TestDocumentedDefaults(t *testing.T) {
	s, err := Parse([]byte("probes: {}\nmonitor: {light: {interval: 30s, tests: [qperf_tcp_lat]}}"))
	if err != nil {
		t.Fatal(err)
	}
	norm, err := testspec.Normalize(s.Plans[0].Spec.GetTests()[0])
	if err != nil {
		t.Fatal(err)
	}
	p := s.Probes
	applied := map[string]string{
		"Probes.Interval":     p.GetInterval().AsDuration().String(),
		"Probes.PayloadBytes": itoa(p.GetPayloadBytes()), "Probes.MaxInFlight": itoa(p.GetMaxInFlight()),
		"Probes.MaxPacketsPerSecond": itoa(p.GetMaxPacketsPerSecond()),
		"Probes.IPFamilies":          "ipv4", // nil: IPv4 only
		"Schedule.Duration":          norm.GetQperf().GetDuration().AsDuration().String(),
	}
	if p.GetIpFamilies() != nil {
		t.Errorf("ip_families %v, want none (IPv4)", p.GetIpFamilies())
	}
	for name, got := range applied {
		typ, field, _ := strings.Cut(name, ".")
		var rt reflect.Type
		switch typ {
		case "Probes":
			rt = reflect.TypeFor[Probes]()
		case "Schedule":
			rt = reflect.TypeFor[Schedule]()
		}
		f, ok := rt.FieldByName(field)
		if !ok {
			t.Fatalf("no field %s", name)
		}
		if doc := f.Tag.Get("default"); doc != got {
			t.Errorf("%s: documented default %q, applied %q", name, doc, got)
		}
	}
}

// itoa is n in decimal.
func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
