package remotewrite

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/series"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// lossReports are n probe intervals of src to dst, one loss sample each
// (value 1: nothing came back), all of one series, one second apart from
// start.
func lossReports(src, dst string, n int, start time.Time) []series.Report {
	out := make([]series.Report, n)
	for i := range out {
		out[i] = series.Report{Src: src, Start: start.Add(time.Duration(i) * time.Second), Period: time.Second,
			Summaries: []series.Summary{{Dst: dst, Path: hh, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 10,
				Status: measurev1.Status_STATUS_TIMEOUT}}}
	}
	return out
}

// lossSeries is the labels of lossReports' series.
func lossSeries(src, dst string) string {
	return fmt.Sprintf("__name__=meshperf_pair_loss_ratio,dst=%s,path=host-host,src=%s,test=probe_icmp", dst, src)
}

func TestRetryDecisions(t *testing.T) {
	for _, tc := range []struct {
		name        string
		script      []int
		retryAfter  string
		wantSent    int64
		wantDropped int64
		wantReqs    int64
		wantRetries int64
	}{
		{"accepted at once", nil, "", 5, 0, 1, 0},
		{"503 then accepted", []int{503, 503}, "", 5, 0, 3, 2},
		{"500 then accepted", []int{500}, "", 5, 0, 2, 1},
		{"429 with Retry-After then accepted", []int{429}, "1", 5, 0, 2, 1},
		{"429 with a Retry-After past MaxBackoff, waited MaxBackoff", []int{429}, "99999999", 5, 0, 2, 1},
		{"connection closed then accepted", []int{0, 0}, "", 5, 0, 3, 2},
		{"400 rejected, no retry", []int{400}, "", 0, 5, 1, 0},
		{"404 rejected, no retry", []int{404}, "", 0, 5, 1, 0},
		{"413 rejected, no retry", []int{413}, "", 0, 5, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.script...)
			if tc.retryAfter != "" {
				rcv.header.Set("Retry-After", tc.retryAfter)
			}
			w, err := New(fastConfig(rcv.url))
			if err != nil {
				t.Fatal(err)
			}
			stop := runWriter(t, w)
			w.Reports(lossReports("a", "b", 5, t0))
			stop()
			rcv.check(t)
			st := w.Stats()
			if st.Sent != tc.wantSent || st.Rejected != tc.wantDropped || st.Dropped != tc.wantDropped || st.Failed != 0 ||
				st.Requests != tc.wantReqs || st.Retries != tc.wantRetries {
				t.Errorf("stats %+v, want sent %d, dropped (rejected) %d, requests %d, retries %d",
					st, tc.wantSent, tc.wantDropped, tc.wantReqs, tc.wantRetries)
			}
			if got := len(rcv.samples()[lossSeries("a", "b")]); int64(got) != tc.wantSent {
				t.Errorf("receiver got %d samples, want %d", got, tc.wantSent)
			}
		})
	}
}

func TestBatching(t *testing.T) {
	for _, tc := range []struct {
		name      string
		batch     int
		samples   int
		wantSizes []int
	}{
		{"one batch", 10, 7, []int{7}},
		{"full batches and a rest", 100, 250, []int{100, 100, 50}},
		{"exactly full", 50, 100, []int{50, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t)
			cfg := fastConfig(rcv.url)
			cfg.BatchSamples = tc.batch
			cfg.BatchWait = time.Hour // only full batches, and the flush
			w, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			stop := runWriter(t, w)
			w.Reports(lossReports("a", "b", tc.samples, t0))
			stop()
			rcv.check(t)
			var sizes []int
			rcv.mu.Lock()
			for _, s := range rcv.series {
				sizes = append(sizes, len(s.samples)) // one series: one TimeSeries per request
			}
			rcv.mu.Unlock()
			if fmt.Sprint(sizes) != fmt.Sprint(tc.wantSizes) {
				t.Errorf("request sizes %v, want %v", sizes, tc.wantSizes)
			}
			got := rcv.samples()[lossSeries("a", "b")]
			for i, s := range got { // order kept
				if want := t0.Add(time.Duration(i) * time.Second).UnixMilli(); s.ts != want {
					t.Fatalf("sample %d at %d, want %d: order lost", i, s.ts, want)
				}
			}
		})
	}
}

func TestBatchWaitSendsAPartialBatch(t *testing.T) {
	rcv := newReceiver(t)
	cfg := fastConfig(rcv.url)
	cfg.BatchSamples = 1000
	cfg.BatchWait = 20 * time.Millisecond
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runWriter(t, w)
	w.Reports(lossReports("a", "b", 3, t0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for w.Stats().Sent < 3 { // sent before any flush: by the wait
		select {
		case <-ctx.Done():
			t.Fatalf("3 samples not sent within 10 s by BatchWait: %+v", w.Stats())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestQueueDropsTheOldest(t *testing.T) {
	for _, tc := range []struct {
		name           string
		capacity, push int
	}{
		{"under", 10, 7},
		{"full", 10, 10},
		{"over", 10, 25},
		{"over, across chunks", 3*chunkLen + 5, 5*chunkLen + 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(tc.capacity)
			drops := 0
			q.mu.Lock()
			for i := range tc.push {
				if q.push(sample{ts: int64(i)}, t0) {
					drops++
				}
			}
			got, _ := q.take(nil, tc.push, t0)
			q.mu.Unlock()
			wantDrops := max(0, tc.push-tc.capacity)
			if drops != wantDrops || len(got) != tc.push-wantDrops {
				t.Fatalf("dropped %d and kept %d, want %d and %d", drops, len(got), wantDrops, tc.push-wantDrops)
			}
			for i, s := range got {
				if s.ts != int64(wantDrops+i) {
					t.Fatalf("kept[%d] is sample %d, want %d (the newest kept, in order)", i, s.ts, wantDrops+i)
				}
			}
			if q.len() != 0 {
				t.Errorf("queue holds %d after taking all", q.len())
			}
		})
	}
}

func TestOverflowDuringOutageIsCounted(t *testing.T) {
	rcv := newReceiver(t)
	rcv.hold = make(chan struct{}) // the first request hangs: one batch in flight
	cfg := fastConfig(rcv.url)
	cfg.QueueSamples, cfg.BatchSamples = 20, 5
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runWriter(t, w)
	w.Reports(lossReports("a", "b", 5, t0)) // the batch in flight
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for w.Stats().InFlight != 5 {
		select {
		case <-ctx.Done():
			t.Fatalf("no batch in flight: %+v", w.Stats())
		case <-time.After(time.Millisecond):
		}
	}
	w.Reports(lossReports("a", "b", 40, t0.Add(time.Hour))) // 20 fit, the 20 oldest are dropped
	if st := w.Stats(); st.QueueFull != 20 || st.Queued != 20 {
		t.Errorf("queue full drops %d, queued %d; want 20 and 20", st.QueueFull, st.Queued)
	}
	close(rcv.hold)
	rcv.mu.Lock()
	rcv.hold = nil
	rcv.mu.Unlock()
	stop()
	st := w.Stats()
	if st.Sent != 25 || st.Dropped != 20 || st.Failed != 0 {
		t.Errorf("stats %+v, want 25 sent, 20 dropped", st)
	}
	got := rcv.samples()[lossSeries("a", "b")]
	if len(got) != 25 {
		t.Fatalf("receiver got %d samples, want 25", len(got))
	}
	for i, s := range got[5:] { // the newest 20, in order
		if want := t0.Add(time.Hour + time.Duration(20+i)*time.Second).UnixMilli(); s.ts != want {
			t.Errorf("sample %d at %d, want %d", 5+i, s.ts, want)
		}
	}
}

func TestShutdownCountsWhatIsLeft(t *testing.T) {
	rcv := newReceiver(t, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503)
	rcv.header.Set("Retry-After", "1")
	cfg := fastConfig(rcv.url)
	cfg.BatchSamples, cfg.FlushTimeout = 4, 10*time.Millisecond
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runWriter(t, w)
	w.Reports(lossReports("a", "b", 10, t0))
	stop()
	if st := w.Stats(); st.Failed != 10 || st.Sent != 0 || st.Dropped != 0 || st.Queued != 0 {
		t.Errorf("stats %+v, want all 10 failed", st)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if code := http.StatusServiceUnavailable; rcv.requests == 0 {
		t.Errorf("no request answered %d", code)
	}
}

// TestRedirectNotFollowed: a receiver answering 307 to another host gets
// its batch counted as rejected, and the other host gets neither the
// samples nor the bearer token.
func TestRedirectNotFollowed(t *testing.T) {
	other := newReceiver(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.url, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(redirect.URL + "/api/v1/write")
	cfg.BearerTokenFile = tok
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runWriter(t, w)
	w.Reports(lossReports("a", "b", 5, t0))
	stop()
	other.mu.Lock()
	reqs, auth := other.requests, other.auth
	other.mu.Unlock()
	if reqs != 0 {
		t.Errorf("the redirect's target got %d requests (authorization %q), want none", reqs, auth)
	}
	if st := w.Stats(); st.Sent != 0 || st.Rejected != 5 {
		t.Errorf("stats %+v, want 0 sent and 5 rejected", st)
	}
}

// TestInternManyNames: after more than 65,536 node names (a fleet's churn
// over the coordinator's life), every test, probe kind and path name
// still has a 16-bit index that names it, and a new name past the bound
// is "", never another name.
func TestInternManyNames(t *testing.T) {
	q := newQueue(10)
	for i := range 70000 {
		q.intern(fmt.Sprintf("node-%05d", i))
	}
	for _, name := range append(labelNames(), "probe_tcp", "pod-pod", "ping") {
		if got := q.names[q.intern16(name)]; got != name {
			t.Errorf("intern16(%q) names %q", name, got)
		}
	}
	if got := q.names[q.intern16("a-test-of-the-future")]; got != "" {
		t.Errorf("a name past the bound names %q, want \"\"", got)
	}
}
