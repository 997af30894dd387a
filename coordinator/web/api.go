package web

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// jsonMarshal encodes v without a trailing newline.
func jsonMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// agentView is one row of the agents page.
type agentView struct {
	Node        string   `json:"node"`
	State       string   `json:"state"`
	NodeState   string   `json:"node_state"`
	Connected   bool     `json:"connected"`
	Maintenance bool     `json:"maintenance"`
	Version     string   `json:"version"`
	Gossip      string   `json:"gossip"`
	AliveBy     []string `json:"gossip_alive_by"`
	DeadBy      []string `json:"gossip_dead_by"`
	Partition   string   `json:"partition"`
	LastSeen    string   `json:"last_seen"`
	Addresses   []string `json:"addresses"`
}

// agentState is the agents page's data-state of a: departed,
// connected or disconnected.
func agentState(a *meshv1.Agent) string {
	switch {
	case a.GetState() == meshv1.NodeState_NODE_STATE_DEPARTED:
		return "departed"
	case a.GetConnected():
		return "connected"
	}
	return "disconnected"
}

func rfc3339(t interface{ AsTime() time.Time }, set bool) string {
	if !set {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

func (u *UI) apiAgents(r *http.Request) (any, error) {
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		return nil, err
	}
	resp, err := u.cfg.Source.ListAgents(r.Context(), &meshv1.ListAgentsRequest{})
	if err != nil {
		return nil, err
	}
	out := []agentView{}
	for _, a := range resp.GetAgents() {
		v := agentView{Node: a.GetNodeName(), State: agentState(a), NodeState: testspec.NodeStateName(a.GetState()),
			Connected: a.GetConnected(), Maintenance: a.GetMaintenance(), Version: a.GetAgentVersion(),
			Gossip: testspec.GossipStateName(a.GetGossipState()), AliveBy: a.GetGossipAliveBy(), DeadBy: a.GetGossipDeadBy(),
			Partition: a.GetPartition(), LastSeen: rfc3339(a.GetLastSeenTime(), a.GetLastSeenTime() != nil), Addresses: []string{}}
		if v.AliveBy == nil {
			v.AliveBy = []string{}
		}
		if v.DeadBy == nil {
			v.DeadBy = []string{}
		}
		for _, ad := range a.GetAddresses() {
			v.Addresses = append(v.Addresses, testspec.NetworkName(ad.GetNetwork())+" "+ad.GetIp())
		}
		out = append(out, v)
	}
	return map[string]any{"agents": out, "refresh_seconds": u.cfg.RefreshInterval.Seconds()}, nil
}

// runHeader is a run in the runs list and on the run page.
type runHeader struct {
	ID      string `json:"id"`
	Label   string `json:"label"`
	State   string `json:"state"`
	Message string `json:"message"`
	Created string `json:"created"`
	Ended   string `json:"ended"`
	Done    uint32 `json:"done"`
	Failed  uint32 `json:"failed"`
	Total   uint32 `json:"total"`
	Tests   string `json:"tests"`
	Paths   string `json:"paths"`
}

func headerOf(r *measurev1.Run) runHeader {
	h := runHeader{ID: r.GetRunId(), Label: r.GetSpec().GetLabel(), State: testspec.RunStateName(r.GetState()), Message: r.GetMessage(),
		Created: rfc3339(r.GetCreateTime(), r.GetCreateTime() != nil), Ended: rfc3339(r.GetEndTime(), r.GetEndTime() != nil),
		Done: r.GetTestsDone(), Failed: r.GetTestsFailed(), Total: r.GetTestsPlanned()}
	if h.Total == 0 {
		h.Total = uint32(len(r.GetPlanned()))
	}
	var ts, ps []string
	for _, t := range specTests(r.GetSpec()) {
		ts = append(ts, testspec.Name(t))
	}
	for _, p := range specPaths(r.GetSpec()) {
		ps = append(ps, testspec.PathName(p))
	}
	h.Tests, h.Paths = strings.Join(ts, ","), strings.Join(ps, ",")
	return h
}

func (u *UI) apiRuns(r *http.Request) (any, error) {
	q, err := parseQuery(r.URL.RawQuery, "page_token")
	if err != nil {
		return nil, err
	}
	resp, err := u.cfg.Source.ListRuns(r.Context(), &meshv1.ListRunsRequest{PageSize: 100, PageToken: q.pageToken})
	if err != nil {
		return nil, err
	}
	out := []runHeader{}
	for _, run := range resp.GetRuns() {
		out = append(out, headerOf(run))
	}
	return map[string]any{"runs": out, "next_page_token": resp.GetNextPageToken(), "refresh_seconds": u.cfg.RefreshInterval.Seconds()}, nil
}

// matrixView is one matrix of a run's report: flat n*n medians.
type matrixView struct {
	Title  string   `json:"title"`
	Test   string   `json:"test"`
	Path   string   `json:"path"`
	Unit   string   `json:"unit"`
	Nodes  []string `json:"nodes"`
	Value  []fig    `json:"value"`
	Failed []int    `json:"failed"`
}

// overheadView is one overhead line against host-host.
type overheadView struct {
	Path  string `json:"path"`
	Test  string `json:"test"`
	Ratio fig    `json:"ratio"`
	Words string `json:"words"`
	Pairs int    `json:"pairs"`
}

func (u *UI) apiRun(r *http.Request) (any, error) {
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if why := checkName(id); why != "" {
		return nil, &paramError{name: "run", value: id, want: why}
	}
	resp, err := u.cfg.Source.GetRun(r.Context(), &meshv1.GetRunRequest{RunId: id})
	if err != nil {
		return nil, err
	}
	run := resp.GetRun()
	d, err := u.runData(r.Context(), run)
	if err != nil {
		return nil, err
	}
	cells := d.sorted()
	mats := []matrixView{}
	for _, m := range testcell.Matrices(cells) {
		n := len(m.Nodes)
		mv := matrixView{Title: m.Title(), Test: testspec.Name(m.Test), Path: testspec.PathName(m.Path), Unit: testcell.Unit(m.Test), Nodes: m.Nodes,
			Value: make([]fig, n*n), Failed: make([]int, n*n)}
		for i, src := range m.Nodes {
			for j, dst := range m.Nodes {
				mv.Value[i*n+j] = none
				if c := m.Cells[src][dst]; c != nil {
					if len(c.Samples) > 0 {
						mv.Value[i*n+j] = fig(c.Stats.Median)
					}
					mv.Failed[i*n+j] = c.FailedCount()
				}
			}
		}
		mats = append(mats, mv)
	}
	ovs := testcell.Overheads(cells)
	ovv := []overheadView{}
	for _, ov := range ovs {
		title := testspec.Name(ov.Test)
		if ov.Label != "" {
			title += " " + ov.Label
		}
		ovv = append(ovv, overheadView{Path: testspec.PathName(ov.Path), Test: title, Ratio: fig(ov.Ratio), Words: ov.Words(), Pairs: ov.Pairs})
	}
	summary := testcell.Sentences(ovs, run.GetSpec().GetLabel())
	if summary == nil {
		summary = []string{}
	}
	return map[string]any{"run": headerOf(run), "matrices": mats, "overheads": ovv, "summary": summary, "findings": d.findings,
		"diagnosis": diagnose.Summary(d.findings), "refresh_seconds": u.cfg.RefreshInterval.Seconds()}, nil
}

// deltaView is one compared cell.
type deltaView struct {
	Test    string `json:"test"`
	Path    string `json:"path"`
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	Unit    string `json:"unit"`
	A       fig    `json:"a"`
	B       fig    `json:"b"`
	Change  fig    `json:"change"`
	P       fig    `json:"p"`
	Verdict string `json:"verdict"`
}

func (u *UI) apiCompare(r *http.Request) (any, error) {
	q, err := parseQuery(r.URL.RawQuery, "a", "b")
	if err != nil {
		return nil, err
	}
	if err := q.require("a", "b"); err != nil {
		return nil, err
	}
	var sides [2][]*testcell.Cell
	var heads [2]runHeader
	for i, id := range []string{q.a, q.b} {
		resp, err := u.cfg.Source.GetRun(r.Context(), &meshv1.GetRunRequest{RunId: id})
		if err != nil {
			return nil, err
		}
		d, err := u.runData(r.Context(), resp.GetRun())
		if err != nil {
			return nil, err
		}
		heads[i] = headerOf(resp.GetRun())
		sides[i] = d.sorted()
	}
	out := []deltaView{}
	deltas := testcell.Compare(sides[0], sides[1])
	for _, d := range deltas {
		med := func(c *testcell.Cell) fig {
			if c == nil || len(c.Samples) == 0 {
				return none
			}
			return fig(c.Stats.Median)
		}
		title := testspec.Name(d.Key.Test)
		if d.Label != "" {
			title += " " + d.Label
		}
		v := deltaView{Test: title, Path: testspec.PathName(d.Key.Path), Src: d.Key.Src, Dst: d.Key.Dst, Unit: testcell.Unit(d.Key.Test),
			A: med(d.A), B: med(d.B), Change: fig(d.MedianChange), P: none, Verdict: d.Verdict()}
		if d.Tested {
			v.P = fig(d.Test.P)
		}
		if math.IsNaN(d.MedianChange) {
			v.Change = none
		}
		out = append(out, v)
	}
	worse, better := testcell.Tally(deltas)
	return map[string]any{"a": heads[0], "b": heads[1], "cells": out, "worse": worse, "better": better}, nil
}

func (u *UI) apiFindings(r *http.Request) (any, error) {
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		return nil, err
	}
	runs, err := u.endedRuns(r.Context())
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return map[string]any{"run_id": "", "findings": []diagnose.Finding{}}, nil
	}
	// Findings are a list: a run of any number of nodes has them.
	d, err := u.readRunData(r.Context(), runs[0])
	if err != nil {
		return nil, err
	}
	return map[string]any{"run_id": runs[0].GetRunId(), "findings": d.findings, "summary": diagnose.Summary(d.findings)}, nil
}
