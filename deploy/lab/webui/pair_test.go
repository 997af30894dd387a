package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// pairDOM is what the pair page drew and the API answer it drew it from
// (fetched by the page's own origin right after reading the DOM).
type pairDOM struct {
	// Points are the chart's points per path: their data-t, Unix seconds.
	Points map[string][]int64 `json:"points"`
	// Series are the g.series[data-path] groups.
	Series   []string `json:"series"`
	OnDemand int      `json:"ondemand"`
	Range    bool     `json:"range"`
	API      struct {
		Kind        string `json:"kind"`
		Start       int64  `json:"start"`
		End         int64  `json:"end"`
		StepSeconds int64  `json:"step_seconds"`
		Series      []struct {
			Path string  `json:"path"`
			T    []int64 `json:"t"`
		} `json:"series"`
	} `json:"api"`
}

// pairDOMJS reads the chart and then the API answer for the page's own
// query; it is awaited.
const pairDOMJS = `(async () => {
  const c = document.querySelector("svg#pair-chart");
  const points = {};
  if (c) for (const p of c.querySelectorAll("circle.point, [data-t]")) {
    if (p.tagName.toLowerCase() === "g") continue;
    const path = p.dataset.path || (p.closest("g.series") || {dataset: {}}).dataset.path || "";
    (points[path] = points[path] || []).push(Number(p.dataset.t));
  }
  const q = new URLSearchParams(location.search);
  const tok = sessionStorage.getItem("token") || sessionStorage.getItem("meshperf-token");
  const r = await fetch("/api/v1/pair?" + q.toString(), tok ? {headers: {Authorization: "Bearer " + tok}} : {});
  return {
    points, series: c ? [...c.querySelectorAll("g.series[data-path]")].map(g => g.dataset.path) : [],
    ondemand: document.querySelectorAll("#ondemand li, #ondemand tr").length,
    range: !!document.querySelector("select#range, a[href*='range=']"),
    api: await r.json(),
  };
})()`

// readPair reads the pair page's chart and its API answer.
func readPair(tt *tab) (*pairDOM, error) {
	raw, err := evalJSAwait[[]byte](tt, pairDOMJS)
	if err != nil {
		return nil, err
	}
	var p pairDOM
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("pair DOM %.300s: %w", raw, err)
	}
	return &p, nil
}

// probeKind is the ProbeKind of a config name (icmp, tcp, ...).
func probeKind(name string) (measurev1.ProbeKind, error) {
	for v, n := range measurev1.ProbeKind_name {
		if strings.ToLower(strings.TrimPrefix(n, "PROBE_KIND_")) == name && v != 0 {
			return measurev1.ProbeKind(v), nil
		}
	}
	return 0, fmt.Errorf("probe kind %q unknown", name)
}

// checkPairPoints compares the chart with the API answer it came from
// (one point per bucket of every series, one g.series per path) and with
// the coordinator's own series (MeshService.ListProbeSeries): every
// point's bucket [t, t+step) holds a stored sample of the pair, path and
// kind, and every stored sample that started in the range (but the last
// 10 s, which may have come in after the page's query) lies in a drawn
// point's bucket. It returns the problems and the points counted.
func checkPairPoints(ctx context.Context, client meshv1.MeshServiceClient, src, dst string, p *pairDOM) (bad []string, points, samples int) {
	if len(p.API.Series) == 0 {
		return []string{"the pair API has no series"}, 0, 0
	}
	step := p.API.StepSeconds
	if step <= 0 {
		return []string{fmt.Sprintf("pair API step_seconds %d", step)}, 0, 0
	}
	var apiPaths []string
	for _, se := range p.API.Series {
		apiPaths = append(apiPaths, se.Path)
		drawn := slices.Sorted(slices.Values(p.Points[se.Path]))
		want := slices.Sorted(slices.Values(se.T))
		if !slices.Equal(drawn, want) {
			bad = append(bad, fmt.Sprintf("path %s: %d points drawn, the API has %d buckets (drawn %v, API %v)", se.Path, len(drawn), len(want), drawn, want))
		}
		points += len(drawn)
		path, err := testspec.ParsePath(se.Path)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		kind, err := probeKind(p.API.Kind)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		var starts []int64
		req := &meshv1.ListProbeSeriesRequest{SrcNode: src, DstNode: dst, Path: path, Kind: kind,
			StartTime: timestamppb.New(time.Unix(p.API.Start-step, 0)), EndTime: timestamppb.New(time.Unix(p.API.End, 0))}
		for {
			resp, err := client.ListProbeSeries(ctx, req)
			if err != nil {
				bad = append(bad, fmt.Sprintf("ListProbeSeries %s %s -> %s: %v", se.Path, src, dst, err))
				break
			}
			for _, s := range resp.GetSamples() {
				starts = append(starts, s.GetPeriodStart().AsTime().Unix())
			}
			if resp.GetNextPageToken() == "" {
				break
			}
			req.PageToken = resp.GetNextPageToken()
		}
		for _, t := range drawn {
			if !slices.ContainsFunc(starts, func(s int64) bool { return s >= t-1 && s < t+step }) {
				bad = append(bad, fmt.Sprintf("path %s: point at %d has no stored sample in [%d, %d)", se.Path, t, t, t+step))
			}
		}
		for _, s := range starts {
			if s < p.API.Start || s >= p.API.End-10 {
				continue
			}
			samples++
			if !slices.ContainsFunc(drawn, func(t int64) bool { return s >= t-1 && s < t+step }) {
				bad = append(bad, fmt.Sprintf("path %s: stored sample starting %d is in no drawn point's bucket (points %v)", se.Path, s, drawn))
			}
		}
	}
	if got, want := slices.Sorted(slices.Values(p.Series)), slices.Sorted(slices.Values(apiPaths)); !slices.Equal(got, want) {
		bad = append(bad, fmt.Sprintf("g.series[data-path] %v, want one per API path %v", got, want))
	}
	return bad, points, samples
}
