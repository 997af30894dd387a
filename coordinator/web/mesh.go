package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// DegradedRatio is how much worse than its baseline (the host-host figure
// of the same pair, or for host-host itself the matrix's median) a cell's
// median may be before it shows as degraded: latency above twice it,
// throughput below half of it.
const DegradedRatio = 2.0

// DegradedFloorSeconds is how much slower than its baseline a latency must
// also be to show as degraded: 200 µs. Round trips on one switch are a
// few tens of microseconds, and twice that is noise, not a fault.
const DegradedFloorSeconds = 200e-6

// MaxMeshNodes bounds the nodes of a mesh the UI draws: 1,000 nodes are a
// million cells, tens of MB of JSON and more than a browser lays out
// well; beyond, the mesh shows the worstShown nodes with the most bad
// pairs (worstNodes), and a run's report and compare answer 422.
const MaxMeshNodes = 1000

// MaxMeshResults bounds the results of a run the UI reads for its mesh,
// report and compare (a run of 300 nodes, 2 tests and 2 paths has
// 180,000); a larger run is answered 422.
const MaxMeshResults = 2_000_000

// maxRunReads bounds the run reads (ListResults, report and diagnose)
// that run at once, whatever the runs asked for.
const maxRunReads = 2

// readTimeout bounds one shared read (a run's results, a probe period),
// which runs detached from the request that started it.
const readTimeout = 2 * time.Minute

// sharedRead runs read once for all the requests that ask for key while
// it runs (u.reads), detached from the request that started it (its tab
// may close; the others wait on the same read) and bounded by
// readTimeout; with slots, it first waits for one of them (a bound on
// such reads at once).
func (u *UI) sharedRead(ctx context.Context, key string, slots chan struct{}, read func(context.Context) (any, error)) (any, error) {
	v, err, _ := u.reads.Do(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
		defer cancel()
		if slots != nil {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return read(ctx)
	})
	return v, err
}

// errMeshTooLarge is a view too large to draw: 422.
var errMeshTooLarge = errors.New("too large to show")

// maxEmptyPages bounds the empty result pages in a row that a read
// follows: a page reads at most 65,536 keys of the store, so 10,000 are
// more keys than a store holds.
const maxEmptyPages = 10_000

// maxRunsScanned bounds the run headers the mesh reads to find the
// newest ended run of a test and path.
const maxRunsScanned = 1000

// runData is what the UI keeps of an ended run: its cells, each cell's
// ping loss, and diagnose's findings. Ended runs do not change.
type runData struct {
	run      *measurev1.Run
	cells    map[testcell.CellKey]*testcell.Cell
	list     []*testcell.Cell // the cells in testcell.Cells order
	loss     map[testcell.CellKey]float64
	params   map[measurev1.Test]string // the first parameters of each test
	findings []diagnose.Finding
	nodes    int // the nodes of the cells on mesh paths: a matrix is nodes x nodes

	mu    sync.Mutex
	views map[[2]int32]*meshView // filled matrices by test and path
}

// sorted is d's cells in testcell.Cells order.
func (d *runData) sorted() []*testcell.Cell { return d.list }

// meshCache keeps the runData of the last few ended runs.
type meshCache struct {
	mu    sync.Mutex
	max   int
	order []string
	runs  map[string]*runData
}

func newMeshCache(size int) *meshCache { return &meshCache{max: size, runs: map[string]*runData{}} }

func (c *meshCache) get(id string) *runData {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

func (c *meshCache) put(d *runData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := d.run.GetRunId()
	if _, ok := c.runs[id]; ok {
		return
	}
	c.runs[id] = d
	c.order = append(c.order, id)
	if len(c.order) > c.max {
		delete(c.runs, c.order[0])
		c.order = c.order[1:]
	}
}

// specPaths are the paths a run measures.
func specPaths(spec *measurev1.RunSpec) []measurev1.Path {
	if ps := spec.GetPaths(); len(ps) > 0 {
		return ps
	}
	return []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_HOST_TO_POD, measurev1.Path_PATH_POD_TO_POD, measurev1.Path_PATH_POD_TO_SERVICE}
}

// specTests are the tests a run measures.
func specTests(spec *measurev1.RunSpec) []measurev1.Test {
	var out []measurev1.Test
	for _, t := range spec.GetTests() {
		if !slices.Contains(out, t.GetTest()) {
			out = append(out, t.GetTest())
		}
	}
	return out
}

// runHeaders lists the newest maxRunsScanned run headers, newest first.
func (u *UI) runHeaders(ctx context.Context) ([]*measurev1.Run, error) {
	var out []*measurev1.Run
	token := ""
	for len(out) < maxRunsScanned {
		resp, err := u.cfg.Source.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: 200, PageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, resp.GetRuns()...)
		if token = resp.GetNextPageToken(); token == "" || len(resp.GetRuns()) == 0 {
			break
		}
	}
	return out, nil
}

// endedRuns lists the ended runs, newest first: the monitor's if any,
// else all.
func (u *UI) endedRuns(ctx context.Context) ([]*measurev1.Run, error) {
	runs, err := u.runHeaders(ctx)
	if err != nil {
		return nil, err
	}
	var cont, other []*measurev1.Run
	for _, r := range runs {
		switch {
		case !testspec.RunEnded(r.GetState()):
		case testspec.OriginOf(r) == measurev1.RunOrigin_RUN_ORIGIN_MONITOR:
			cont = append(cont, r)
		default:
			other = append(other, r)
		}
	}
	if len(cont) > 0 {
		return cont, nil
	}
	return other, nil
}

// runData reads an ended run's results (cached) for the views that are
// matrices of all its nodes (report, compare): a run of more than
// MaxMeshNodes nodes is errMeshTooLarge (a few mesh rounds of 5,000 nodes
// have only tens of thousands of pairs, and their matrices 25 million
// cells each). The mesh and the findings read readRunData.
func (u *UI) runData(ctx context.Context, run *measurev1.Run) (*runData, error) {
	d, err := u.readRunData(ctx, run)
	if err != nil {
		return nil, err
	}
	if d.nodes > MaxMeshNodes {
		return nil, fmt.Errorf("%w: run %s has %d nodes, more than %d", errMeshTooLarge, run.GetRunId(), d.nodes, MaxMeshNodes)
	}
	return d, nil
}

// readRunData is runData without the node bound.
func (u *UI) readRunData(ctx context.Context, run *measurev1.Run) (*runData, error) {
	if d := u.meshes.get(run.GetRunId()); d != nil {
		return d, nil
	}
	// One read per run at a time: at 300 nodes it takes seconds, and every
	// open page polls.
	if n := run.GetTestsPlanned(); n > MaxMeshResults {
		return nil, fmt.Errorf("%w: run %s has %d tests, more than %d", errMeshTooLarge, run.GetRunId(), n, MaxMeshResults)
	}
	v, err := u.sharedRead(ctx, run.GetRunId(), u.runReads, func(ctx context.Context) (any, error) {
		if d := u.meshes.get(run.GetRunId()); d != nil {
			return d, nil
		}
		results, err := u.results(ctx, &meshv1.ListResultsRequest{RunId: run.GetRunId()}, MaxMeshResults)
		if err != nil {
			return nil, err
		}
		d := buildRunData(run, results)
		if testspec.RunEnded(run.GetState()) {
			u.meshes.put(d)
		}
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*runData), nil
}

func buildRunData(run *measurev1.Run, results []*measurev1.Result) *runData {
	d := &runData{run: run, cells: map[testcell.CellKey]*testcell.Cell{}, loss: map[testcell.CellKey]float64{}, params: map[measurev1.Test]string{}}
	cells := testcell.Cells(results)
	d.list = cells
	nodes := map[string]bool{}
	meshCells, _ := testspec.Split(cells)
	for _, c := range meshCells {
		nodes[c.Src], nodes[c.Dst] = true, true
	}
	for _, c := range cells {
		d.cells[c.CellKey] = c
		if _, ok := d.params[c.Test]; !ok {
			d.params[c.Test] = c.Params
		}
	}
	d.nodes = len(nodes)
	pings := map[testcell.CellKey][]*measurev1.Result{}
	for _, r := range results {
		if r.GetSpec().GetTest() == measurev1.Test_TEST_PING {
			k := testcell.KeyOf(r)
			pings[k] = append(pings[k], r)
		}
	}
	for k, rs := range pings {
		if c := d.cells[k]; c != nil && len(c.Samples) > 0 { // a failed cell has no loss ratio, it failed
			d.loss[k] = testcell.PingLoss(rs)
		}
	}
	d.findings = diagnose.Diagnose(results)
	if d.findings == nil {
		d.findings = []diagnose.Finding{}
	}
	return d
}

// results pages through ListResults: all of them for limit 0, else at
// most limit (each page asks for no more than is left).
func (u *UI) results(ctx context.Context, req *meshv1.ListResultsRequest, limit int) ([]*measurev1.Result, error) {
	var out []*measurev1.Result
	for empty := 0; ; {
		req.PageSize = 10000
		if limit > 0 {
			req.PageSize = uint32(min(10000, limit-len(out)))
		}
		resp, err := u.cfg.Source.ListResults(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list results: %w", err)
		}
		out = append(out, resp.GetResults()...)
		// A short or empty page with a token is not the end: a page
		// reads a bounded number of keys.
		next := resp.GetNextPageToken()
		if next == "" || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		if next == req.PageToken && len(resp.GetResults()) == 0 {
			return nil, errors.New("list results: an empty page and the same page token again")
		}
		if empty++; len(resp.GetResults()) > 0 {
			empty = 0
		} else if empty > maxEmptyPages {
			return nil, fmt.Errorf("list results: %d empty pages in a row, each with a next page token", empty)
		}
		req.PageToken = next
	}
}

func (u *UI) apiMesh(r *http.Request) (any, error) {
	q, err := parseQuery(r.URL.RawQuery, "test", "path")
	if err != nil {
		return nil, err
	}
	return u.mesh(r.Context(), q.test, q.kind, q.path)
}

// mesh builds the mesh view of a run test or a probe kind (kind not
// zero) and path. With neither test nor kind, it is the continuous
// probes' newest period when probes are configured and have reported
// (icmp, pod-pod if probed), else the newest ended run's first test; a
// zero path is pod-pod if measured, else the first.
func (u *UI) mesh(ctx context.Context, test measurev1.Test, kind measurev1.ProbeKind, path measurev1.Path) (*meshView, error) {
	v := &meshView{Nodes: []string{}, Tests: []string{}, Paths: []string{}, Value: figs{}, Base: figs{}, Loss: figs{},
		Findings: []diagnose.Finding{}, DegradedRatio: DegradedRatio, DegradedFloor: DegradedFloorSeconds, RefreshSeconds: u.cfg.RefreshInterval.Seconds(), Median: none}
	runs, err := u.endedRuns(ctx)
	if err != nil {
		return nil, err
	}
	probes := u.cfg.Probes
	if kind != 0 && !probes.on() {
		return nil, &paramError{name: "test", value: testspec.ProbeTestName(kind), want: "no continuous probes are configured"}
	}
	if kind != 0 && !slices.Contains(probes.Kinds, kind) {
		return nil, &paramError{name: "test", value: testspec.ProbeTestName(kind), want: "a probe kind the config probes"}
	}
	if test == 0 && probes.on() && (kind != 0 || path == 0 || slices.Contains(probes.Paths, path)) {
		pv := *v
		u.listChoices(&pv, runs)
		k := kind
		if k == 0 {
			k = probes.Kinds[0]
			if slices.Contains(probes.Kinds, measurev1.ProbeKind_PROBE_KIND_ICMP) {
				k = measurev1.ProbeKind_PROBE_KIND_ICMP
			}
		}
		pp := path
		if pp == 0 {
			pp = probes.Paths[0]
			if slices.Contains(probes.Paths, measurev1.Path_PATH_POD_TO_POD) {
				pp = measurev1.Path_PATH_POD_TO_POD
			}
		}
		if !slices.Contains(probes.Paths, pp) {
			return nil, &paramError{name: "path", value: testspec.PathName(pp), want: "a path the config probes"}
		}
		out, err := u.probeMesh(ctx, &pv, k, pp)
		if err != nil || kind != 0 || len(out.Nodes) > 0 || len(runs) == 0 {
			return out, err
		}
		// No probe report yet: the newest run, if any.
	}
	return u.runMesh(ctx, v, runs, test, path)
}

// listChoices lists in v the tests and paths the mesh can show: the
// probe kinds, then the runs' tests.
func (u *UI) listChoices(v *meshView, runs []*measurev1.Run) {
	var tests []measurev1.Test
	var paths []measurev1.Path
	if p := u.cfg.Probes; p.on() {
		for _, k := range p.Kinds {
			v.Tests = append(v.Tests, testspec.ProbeTestName(k))
		}
		paths = append(paths, p.Paths...)
	}
	for _, run := range runs {
		for _, t := range specTests(run.GetSpec()) {
			if !slices.Contains(tests, t) {
				tests = append(tests, t)
			}
		}
		nodePaths, _ := testspec.SplitPaths(specPaths(run.GetSpec())) // the matrix has no targets
		for _, p := range nodePaths {
			if !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
	}
	slices.Sort(tests)
	slices.Sort(paths)
	for _, t := range tests {
		v.Tests = append(v.Tests, testspec.Name(t))
	}
	for _, p := range paths {
		v.Paths = append(v.Paths, testspec.PathName(p))
	}
}

// runMesh fills v with test and path of the newest ended run that has
// them (zero: the first with data).
func (u *UI) runMesh(ctx context.Context, v *meshView, runs []*measurev1.Run, test measurev1.Test, path measurev1.Path) (*meshView, error) {
	u.listChoices(v, runs)
	var chosen *measurev1.Run
	for _, run := range runs {
		ts := specTests(run.GetSpec())
		ps, _ := testspec.SplitPaths(specPaths(run.GetSpec())) // the matrix has no targets
		if chosen == nil && (test == 0 || slices.Contains(ts, test)) && (path == 0 && len(ps) > 0 || slices.Contains(ps, path)) {
			chosen = run
			if test == 0 && len(ts) > 0 {
				test = ts[0]
			}
			if path == 0 {
				path = ps[0]
				if slices.Contains(ps, measurev1.Path_PATH_POD_TO_POD) {
					path = measurev1.Path_PATH_POD_TO_POD
				}
			}
		}
	}
	if test != 0 {
		v.Test, v.Unit, v.HigherIsBetter = testspec.Name(test), testcell.Unit(test), testcell.HigherIsBetter(test)
	}
	if path != 0 {
		v.Path, v.Baseline = testspec.PathName(path), testspec.PathName(testcell.Baseline(path))
	}
	if chosen == nil {
		return v, nil
	}
	// A run of more than MaxMeshNodes nodes shows its worst (fillMesh).
	d, err := u.readRunData(ctx, chosen)
	if err != nil {
		return nil, err
	}
	k := [2]int32{int32(test), int32(path)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.views[k]; c != nil {
		filled := *c
		filled.Tests, filled.Paths, filled.RefreshSeconds = v.Tests, v.Paths, v.RefreshSeconds
		return &filled, nil
	}
	fillMesh(v, d, test, path)
	if d.views == nil {
		d.views = map[[2]int32]*meshView{}
	}
	d.views[k] = v
	return v, nil
}
