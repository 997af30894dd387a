package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestPageTokenRoundTrip(t *testing.T) {
	scope := Filter{SrcNode: "a"}.scope(listingResults)
	for _, key := range [][]byte{{0}, []byte("a\x00b\x00"), bytes.Repeat([]byte{0xff}, 900)} {
		tok := encodePageToken(listingResults, scope, key)
		got, err := decodePageToken(tok, listingResults, scope)
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("decode(encode(%q)) = %q, %v", key, got, err)
		}
	}
	if got, err := decodePageToken("", listingResults, scope); got != nil || err != nil {
		t.Errorf(`decode("") = %q, %v; want nil, nil (the first page)`, got, err)
	}
}

// Every filter field and the listing change the scope; page size is not
// part of it.
func TestPageScopeSeparatesFilters(t *testing.T) {
	base := Filter{SrcNode: "a", DstNode: "b", Path: 1, Test: 2, RunID: "r", Since: t0, Until: t0.Add(time.Hour)}
	edits := map[string]func(*Filter){
		"src":      func(f *Filter) { f.SrcNode = "b" },
		"dst":      func(f *Filter) { f.DstNode = "" },
		"path":     func(f *Filter) { f.Path = 2 },
		"test":     func(f *Filter) { f.Test = 3 },
		"run":      func(f *Filter) { f.RunID = "r2" },
		"since":    func(f *Filter) { f.Since = t0.Add(time.Nanosecond) },
		"until":    func(f *Filter) { f.Until = time.Time{} },
		"src+dst":  func(f *Filter) { f.SrcNode, f.DstNode = "a\x00b", "" }, // the same bytes run together
		"epoch 0":  func(f *Filter) { f.Since = time.Unix(0, 0) },
		"unset 0s": func(f *Filter) { f.Since = time.Time{} },
	}
	want := base.scope(listingResults)
	if base.scope(listingRollups) == want {
		t.Error("results and rollups share a scope")
	}
	for name, edit := range edits {
		f := base
		edit(&f)
		if f.scope(listingResults) == want {
			t.Errorf("%s: the scope did not change", name)
		}
	}
}

// forged makes a token with valid framing (checksum, version, listing,
// scope) around key: what a client who read this file could build.
func forged(listing byte, scope pageScope, key []byte) string {
	return encodePageToken(listing, scope, key)
}

// Tokens that do not decode, belong elsewhere or carry a key that the
// listing cannot use are refused with ErrInvalid naming page_token.
func TestBadPageTokens(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	seedLists(t, ctx, s)
	_, runsTok, err := s.ListRuns(ctx, 1, "")
	if err != nil || runsTok == "" {
		t.Fatalf("ListRuns: %q, %v", runsTok, err)
	}
	flipped := []byte(runsTok)
	flipped[len(flipped)/2] ^= 0x01
	raw, _ := base64.RawURLEncoding.DecodeString(runsTok)
	v2 := bytes.Clone(raw)
	v2[0] = 2
	v2 = binary.BigEndian.AppendUint32(v2[:len(v2)-4], crc32.Checksum(v2[:len(v2)-4], crcTable))
	runsScope := newScope(listingRuns).sum()
	pair := Filter{SrcNode: "node-1", DstNode: "node-2"}
	key := series.Key{Src: "a", Dst: "b", Path: host2h, Kind: icmp}
	seriesScope := newScope(listingSeries).str("a").str("b").num(int64(host2h)).num(int64(icmp)).time(time.Time{}).time(time.Time{}).sum()
	now := time.Now()

	listRuns := func(tok string) error { _, _, err := s.ListRuns(ctx, 0, tok); return err }
	listResults := func(f Filter) func(string) error {
		return func(tok string) error { _, _, err := s.ListResults(ctx, f, 0, tok); return err }
	}
	listRollups := func(f Filter) func(string) error {
		return func(tok string) error { _, _, err := s.ListRollups(ctx, f, 0, tok); return err }
	}
	listSeries := func(tok string) error {
		_, _, err := s.ListSeries(ctx, key, time.Time{}, time.Time{}, now, 0, tok)
		return err
	}
	tests := []struct {
		name  string
		list  func(string) error
		token string
		want  string
	}{
		{"not base64", listRuns, "%%", "does not decode"},
		{"too short", listRuns, "YWJj", "too short"},
		{"too long", listRuns, strings.Repeat("A", 4*pageTokenMax), "longer than"},
		{"one bit flipped", listRuns, string(flipped), ""},
		{"another version", listRuns, base64.RawURLEncoding.EncodeToString(v2), "version 2"},
		{"another listing", listResults(Filter{}), runsTok, "another listing"},
		{"another filter", listResults(Filter{RunID: "run-1"}), forged(listingResults, Filter{RunID: "run-0"}.scope(listingResults), []byte("run-0\x00x")), "another filter"},
		{"forged run ID with NUL", listRuns, forged(listingRuns, runsScope, []byte("a\x00b")), "no run ID"},
		{"forged result key outside the pair", listResults(pair), forged(listingResults, pair.scope(listingResults), []byte("node-3\x00node-1\x00")), "outside"},
		{"forged result key that does not decode", listResults(pair), forged(listingResults, pair.scope(listingResults), []byte("node-1\x00node-2\x00\x01")), "no result key"},
		{"forged run scan key", listResults(Filter{RunID: "run-0"}), forged(listingResults, Filter{RunID: "run-0"}.scope(listingResults), []byte("run-0\x00")), "no result key"},
		{"forged rollup key", listRollups(pair), forged(listingRollups, pair.scope(listingRollups), []byte("node-1\x00node-2\x00abc")), "no rollup key"},
		{"forged rollup key outside the pair", listRollups(pair), forged(listingRollups, pair.scope(listingRollups), []byte("b\x00")), "outside"},
		{"forged series time of 7 bytes", listSeries, forged(listingSeries, seriesScope, make([]byte, 7)), "no sample time"},
		{"forged series time 0", listSeries, forged(listingSeries, seriesScope, make([]byte, 8)), "no sample time"},
		{"forged series time negative", listSeries, forged(listingSeries, seriesScope, bytes.Repeat([]byte{0xff}, 8)), "no sample time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.list(tt.token)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "page_token") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalid naming page_token and saying %q", err, tt.want)
			}
		})
	}
}

// seedLists stores something for every listing: the results fixture,
// three runs, the fixture's rollups (one per result) and a series of
// a -> b.
func seedLists(t testing.TB, ctx context.Context, s *Store) {
	t.Helper()
	if err := s.AddResults(ctx, fixture()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"run-0", "run-1", "run-2"} {
		if err := s.CreateRun(ctx, &measurev1.Run{RunId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RollUp(ctx, t0.Add(3*time.Hour), 0, func(rs []*measurev1.Result) []*measurev1.Rollup {
		var out []*measurev1.Rollup
		for _, r := range rs {
			out = append(out, &measurev1.Rollup{SrcNode: r.GetSrcNode(), DstNode: r.GetDstNode(), Path: r.GetPath(),
				Spec: r.GetSpec(), HourStart: r.GetStartTime(), Samples: 1})
		}
		return out
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddResults(ctx, fixture()); err != nil { // RollUp took the first ones
		t.Fatal(err)
	}
	m := newMesh(1, 2, time.Now().Add(-time.Hour))
	m.srcs, m.dsts = []string{"a"}, []string{"b"}
	for i := range 5 {
		if _, err := s.AppendReports(ctx, m.reports(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// Pages of a series over many chunks, the head and a range that starts
// mid-block are, end to end, what one Series call returns.
func TestListSeriesPagesMatchSeries(t *testing.T) {
	ctx := testnet.Ctx(t, 60*time.Second)
	s, _ := openTemp(t)
	now := time.Now()
	m := newMesh(1, 2, now.Add(-7*time.Hour))
	m.srcs, m.dsts = []string{"a"}, []string{"b"}
	const periods = 7 * 360 // 7 h of 10 s: four 2 h blocks
	for i := 0; i < periods; i += 100 {
		var rs []series.Report
		for j := i; j < min(i+100, periods); j++ {
			rs = append(rs, m.reports(j)...)
		}
		if _, err := s.AppendReports(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.CompactSeries(ctx, now.Add(-30*time.Minute)); err != nil || n == 0 {
		t.Fatalf("CompactSeries = %d, %v; want some compacted", n, err)
	}
	key := series.Key{Src: "a", Dst: "b", Path: host2h, Kind: icmp}
	for _, tt := range []struct {
		name         string
		since, until time.Time
		size         int
	}{
		{"the default day, small pages", time.Time{}, time.Time{}, 97},
		{"mid-block to mid-block", now.Add(-5*time.Hour - 7*time.Second), now.Add(-time.Hour), 500},
		{"pages larger than a block", time.Time{}, time.Time{}, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			from, to := tt.since, tt.until
			if to.IsZero() {
				to = now
			}
			if from.IsZero() {
				from = to.Add(-DefaultSeriesRange)
			}
			want, err := s.Series(ctx, key, from, to)
			if err != nil || len(want) < 2*tt.size {
				t.Fatalf("Series: %d samples, %v; want more than two pages", len(want), err)
			}
			var got []series.Sample
			token := ""
			for pages := 0; ; pages++ {
				page, next, err := s.ListSeries(ctx, key, tt.since, tt.until, now, tt.size, token)
				if err != nil || pages > len(want) {
					t.Fatalf("page %d: %v", pages, err)
				}
				if next != "" && page.Len() != tt.size || len(page.Rollups) > 0 {
					t.Fatalf("page %d has %d samples, %d rollups and a next page; want %d samples", pages, len(page.Samples), len(page.Rollups), tt.size)
				}
				got = append(got, page.Samples...)
				if token = next; token == "" {
					break
				}
			}
			if len(got) != len(want) {
				t.Fatalf("pages hold %d samples, Series %d", len(got), len(want))
			}
			for i := range got {
				if !got[i].Start.Equal(want[i].Start) || got[i].RTTMedian != want[i].RTTMedian {
					t.Fatalf("sample %d: pages %v, Series %v", i, got[i], want[i])
				}
			}
		})
	}
}

// FuzzPageToken feeds arbitrary tokens to the decoder and to every
// listing of a seeded store: each is accepted (and then re-encodes to
// itself) or refused with ErrInvalid, never a panic or another error.
func FuzzPageToken(f *testing.F) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, _ := openTemp(f)
	seedLists(f, ctx, s)
	pair := Filter{SrcNode: "node-1", DstNode: "node-2"}
	key := series.Key{Src: "a", Dst: "b", Path: host2h, Kind: icmp}
	now := time.Now()
	for _, fn := range []func() (string, error){
		func() (string, error) { _, tok, err := s.ListRuns(ctx, 1, ""); return tok, err },
		func() (string, error) { _, tok, err := s.ListResults(ctx, Filter{}, 1, ""); return tok, err },
		func() (string, error) {
			_, tok, err := s.ListResults(ctx, Filter{RunID: "run-0"}, 1, "")
			return tok, err
		},
		func() (string, error) { _, tok, err := s.ListRollups(ctx, pair, 1, ""); return tok, err },
		func() (string, error) {
			_, tok, err := s.ListSeries(ctx, key, time.Time{}, time.Time{}, now, 1, "")
			return tok, err
		},
	} {
		tok, err := fn()
		if err != nil || tok == "" {
			f.Fatalf("seed token %q, %v", tok, err)
		}
		f.Add(tok)
	}
	f.Add("")
	f.Add("%%")
	f.Add("AQEAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		scope := pair.scope(listingResults)
		if k, err := decodePageToken(tok, listingResults, scope); err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "page_token") {
				t.Fatalf("decode %q: %v, want ErrInvalid naming page_token", tok, err)
			}
		} else if tok != "" && (len(k) == 0 || encodePageToken(listingResults, scope, k) != tok) {
			t.Fatalf("decode %q = %q, which does not encode back", tok, k)
		}
		for name, list := range map[string]func() error{
			"runs":           func() error { _, _, err := s.ListRuns(ctx, 2, tok); return err },
			"results":        func() error { _, _, err := s.ListResults(ctx, Filter{}, 2, tok); return err },
			"results of run": func() error { _, _, err := s.ListResults(ctx, Filter{RunID: "run-0"}, 2, tok); return err },
			"results of pair": func() error {
				_, _, err := s.ListResults(ctx, pair, 2, tok)
				return err
			},
			"rollups": func() error { _, _, err := s.ListRollups(ctx, pair, 2, tok); return err },
			"series": func() error {
				_, _, err := s.ListSeries(ctx, key, time.Time{}, time.Time{}, now, 2, tok)
				return err
			},
		} {
			if err := list(); err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s with token %q: %v, want nil or ErrInvalid", name, tok, err)
			}
		}
	})
}

// givesUpCtx is a context whose Err is nil on its first call and
// context.Canceled after: a caller that gives up while its scan runs.
type givesUpCtx struct {
	context.Context
	calls int
}

func (c *givesUpCtx) Err() error {
	if c.calls++; c.calls > 1 {
		return context.Canceled
	}
	return nil
}

// TestListScanHonoursContext: a listing whose filter matches nothing
// reads every key of its range in one read transaction; it ends that
// scan once its caller gave up, within scanCheckEvery keys, with the
// context's error rather than a full scan and an empty page.
func TestListScanHonoursContext(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	var rs []*measurev1.Result
	for i := range 3 * scanCheckEvery {
		rs = append(rs, result("run-1", fmt.Sprintf("t%05d", i), "node-1", "node-2", measurev1.Path_PATH_HOST_TO_HOST,
			measurev1.Test_TEST_PING, t0.Add(time.Duration(i)*time.Second)))
	}
	if err := s.AddResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	miss := Filter{Test: measurev1.Test_TEST_HTTP} // no index: a scan of every result
	if got, _, err := s.ListResults(ctx, miss, 1, ""); err != nil || len(got) != 0 {
		t.Fatalf("ListResults(miss) = %d results, %v; want none, no error", len(got), err)
	}
	if _, _, err := s.ListResults(&givesUpCtx{Context: ctx}, miss, 1, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("ListResults with a caller that gave up: %v, want context.Canceled", err)
	}
}
