package web

import (
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ranges are the pair page's time ranges by name.
var ranges = map[string]time.Duration{
	"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour,
}

// defaultRange is the pair page's range when none is asked.
const defaultRange = "24h"

// maxNameBytes bounds a node or run ID parameter.
const maxNameBytes = 253

// query is the API's query parameters, parsed; zero fields were absent.
type query struct {
	test      measurev1.Test
	kind      measurev1.ProbeKind // a continuous probe kind (test "probe_icmp", ...)
	path      measurev1.Path
	src, dst  string
	rangeName string
	span      time.Duration
	a, b      string
	pageToken string
}

// parseQuery parses raw (a URL's query) keeping the parameters allowed:
// another parameter, a repeated one, or a bad value is a *paramError
// naming it and its value.
func parseQuery(raw string, allowed ...string) (query, error) {
	var q query
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return q, &paramError{name: "query", value: raw, want: "not a URL query: " + err.Error()}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range vals {
			if !yield(k) {
				return
			}
		}
	}) {
		vs := vals[name]
		v := vs[0]
		bad := func(want string) error { return &paramError{name: name, value: v, want: want} }
		switch {
		case name == "":
			return q, &paramError{name: "query", value: raw, want: "holds a parameter without a name"}
		case !slices.Contains(allowed, name):
			return q, bad("unknown parameter: want " + strings.Join(allowed, ", "))
		case len(vs) > 1:
			return q, bad("given more than once")
		}
		switch name {
		case "test":
			if v == "" {
				continue
			}
			if k, ok := testspec.ParseProbeTestName(v); ok {
				q.kind = k
				continue
			}
			if q.test, err = testspec.ParseTest(v); err != nil || q.test == measurev1.Test_TEST_UNSPECIFIED {
				return q, bad("want a test name: " + strings.Join(testspec.TestNames(), ", "))
			}
		case "path":
			if v == "" {
				continue
			}
			if q.path, err = testspec.ParsePath(v); err != nil || q.path == measurev1.Path_PATH_UNSPECIFIED {
				return q, bad("want a path: " + strings.Join(testspec.PathNames(), ", "))
			}
		case "src", "dst", "a", "b":
			if err := checkName(v); err != "" {
				return q, bad(err)
			}
			*q.name(name) = v
		case "range":
			d, ok := ranges[v]
			if !ok {
				return q, bad("want 1h, 24h, 7d or 30d")
			}
			q.rangeName, q.span = v, d
		case "kind":
			// checked by its handler
		case "page_token":
			if len(v) > 4096 {
				return q, bad("longer than 4096 bytes")
			}
			q.pageToken = v
		}
	}
	if q.span == 0 && slices.Contains(allowed, "range") {
		q.rangeName, q.span = defaultRange, ranges[defaultRange]
	}
	return q, nil
}

// checkName returns why v is not a node name or run ID, or "".
func checkName(v string) string {
	switch {
	case v == "":
		return "empty: want a name"
	case len(v) > maxNameBytes:
		return "longer than 253 bytes"
	case strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return "holds a control character or invalid UTF-8"
	}
	return ""
}

// name is the field of a name parameter: src, dst, a or b; nil for
// another.
func (q *query) name(param string) *string {
	switch param {
	case "src":
		return &q.src
	case "dst":
		return &q.dst
	case "a":
		return &q.a
	case "b":
		return &q.b
	}
	return nil
}

// require returns a *paramError naming the first of the name parameters
// (src, dst, a, b) that is absent.
func (q *query) require(params ...string) error {
	for _, p := range params {
		if *q.name(p) == "" {
			return &paramError{name: p, want: "required"}
		}
	}
	return nil
}
