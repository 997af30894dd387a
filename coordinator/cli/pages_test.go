package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/server"
	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// sliceLister pages through items as a server would: at most size a
// page (serverMax if size is 0 or larger), the token the next index.
func sliceLister(items []int, serverMax int, calls *int) lister[int] {
	return func(_ context.Context, size uint32, token string) ([]int, string, error) {
		*calls++
		from := 0
		if token != "" {
			from, _ = strconv.Atoi(token)
		}
		n := int(size)
		if n == 0 || n > serverMax {
			n = serverMax
		}
		to := min(from+n, len(items))
		next := ""
		if to < len(items) {
			next = strconv.Itoa(to)
		}
		return items[from:to], next, nil
	}
}

func TestFollow(t *testing.T) {
	items := make([]int, 25)
	for i := range items {
		items[i] = i
	}
	o := &options{timeout: time.Second}
	for _, tt := range []struct {
		name             string
		token            string
		want, maxPage    int
		wantN, wantCalls int
		wantNext         string
	}{
		{"all, several pages", "", 0, 10, 25, 3, ""},
		{"a limit inside a page ends there", "", 7, 10, 7, 1, "7"},
		{"a limit past a page follows on", "", 13, 10, 13, 2, "13"},
		{"a limit at the end", "", 25, 10, 25, 3, ""},
		{"a limit past the end", "", 40, 10, 25, 3, ""},
		{"from a token", "20", 0, 10, 5, 1, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			got, next, err := follow(context.Background(), o, "list", tt.token, tt.want, tt.maxPage, sliceLister(items, 10, &calls))
			if err != nil || len(got) != tt.wantN || next != tt.wantNext || calls != tt.wantCalls {
				t.Errorf("follow = %d items, next %q, %d calls, %v; want %d, %q, %d", len(got), next, calls, err, tt.wantN, tt.wantNext, tt.wantCalls)
			}
			if start, _ := strconv.Atoi(tt.token); len(got) > 0 && got[0] != start {
				t.Errorf("first item %d, want %d", got[0], start)
			}
		})
	}
	// A server that returns an empty page and the same token would loop
	// forever.
	stuck := func(context.Context, uint32, string) ([]int, string, error) { return nil, "again", nil }
	if _, _, err := follow(context.Background(), o, "list", "again", 0, 10, stuck); err == nil {
		t.Error("follow accepted an empty page with the token it asked with")
	}
	// Empty pages that move on forever (A, B, A, ...) end in an error.
	cycling := func(_ context.Context, _ uint32, token string) ([]int, string, error) {
		if token == "A" {
			return nil, "B", nil
		}
		return nil, "A", nil
	}
	if _, _, err := follow(context.Background(), o, "list", "", 0, 10, cycling); err == nil || !strings.Contains(err.Error(), "empty pages in a row") {
		t.Errorf("follow over cycling empty pages: %v, want an error", err)
	}
	// Empty pages that move on (a scan that read its keys and matched
	// none) are followed to the end.
	sparse := func(_ context.Context, _ uint32, token string) ([]int, string, error) {
		n, _ := strconv.Atoi(token)
		if n == 5 {
			return []int{42}, "", nil
		}
		return nil, strconv.Itoa(n + 1), nil
	}
	if got, next, err := follow(context.Background(), o, "list", "", 0, 10, sparse); err != nil || len(got) != 1 || got[0] != 42 || next != "" {
		t.Errorf("follow over empty pages = %v, %q, %v; want [42] at the end", got, next, err)
	}
}

// `coordinator runs` over a real store and server: --limit pages, the
// hint names the token of the next page, and --page-token resumes there.
func TestRunsCommandPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var ids []string
	for i := range 8 {
		id := fmt.Sprintf("01RUN%04d", i)
		ids = append(ids, id)
		origin := measurev1.RunOrigin_RUN_ORIGIN_CLIENT
		if i%2 == 0 {
			origin = measurev1.RunOrigin_RUN_ORIGIN_MONITOR
		}
		if err := st.CreateRun(ctx, &measurev1.Run{RunId: id, State: measurev1.RunState_RUN_STATE_SUCCEEDED, Origin: origin}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Reverse(ids)
	sock := serveMesh(t, server.New(server.Config{Store: st}))
	run := func(args ...string) (stdout, stderr string) {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd := NewCommand(&out, &errOut)
		cmd.SetArgs(append([]string{"runs", "--coordinator", "unix://" + sock}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("runs %v: %v\n%s", args, err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	listed := func(stdout string) []string { return regexp.MustCompile(`01RUN\d{4}`).FindAllString(stdout, -1) }

	out, hint := run("--limit", "5")
	if got := listed(out); !slices.Equal(got, ids[:5]) {
		t.Fatalf("--limit 5 listed %v, want %v", got, ids[:5])
	}
	// Each run's origin in its own column.
	for _, want := range []string{`(?m)^RUN\s+LABEL\s+ORIGIN\s+STATE`, `(?m)^01RUN0007\s+-\s+client\s+succeeded`, `(?m)^01RUN0006\s+-\s+monitor\s+succeeded`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("runs table lacks %s:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`--page-token (\S+)`).FindStringSubmatch(hint)
	if m == nil {
		t.Fatalf("no --page-token hint after a partial listing: %q", hint)
	}
	out, hint = run("--limit", "0", "--page-token", m[1])
	if got := listed(out); !slices.Equal(got, ids[5:]) {
		t.Errorf("--page-token listed %v, want %v", got, ids[5:])
	}
	if strings.Contains(hint, "--page-token") {
		t.Errorf("a hint after the last page: %q", hint)
	}
	out, _ = run("-o", "json", "--limit", "8") // protojson varies its spacing: compare fields
	if got := listed(out); !slices.Equal(got, ids) || !strings.Contains(strings.Join(strings.Fields(out), " "), `"next_page_token": ""`) {
		t.Errorf("json of every run: %v\n%s", got, out)
	}
	var errOut bytes.Buffer
	cmd := NewCommand(&bytes.Buffer{}, &errOut)
	cmd.SetArgs([]string{"runs", "--coordinator", "unix://" + sock, "--page-token", "forged"})
	if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "page_token") {
		t.Errorf("a forged --page-token: %v, want an error naming page_token", err)
	}
}
