package clidoc

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

func TestLinks(t *testing.T) {
	type L = Link
	tests := []struct {
		name string
		md   string
		want []Link
	}{
		{"inline link", "see [ops](docs/operations.md).", []L{{"docs/operations.md", ""}}},
		{"image", "![mesh](docs/screenshots/mesh.png)", []L{{"docs/screenshots/mesh.png", ""}}},
		{"fragments", "[a](lab.md#faults) and [b](#here)", []L{{"lab.md", "faults"}, {"", "here"}}},
		{"title", `[a](lab.md "The lab")`, []L{{"lab.md", ""}}},
		{"angle brackets", "[a](<my page.md>)", []L{{"my page.md", ""}}},
		{"parentheses balanced", "[a](x(1).md) then", []L{{"x(1).md", ""}}},
		{"absolute urls left out", "[a](https://example.com/x.md) [m](mailto:a@b) [p](//host/x)", nil},
		{"code span left out", "`[a](no.md)` but [b](yes.md)", []L{{"yes.md", ""}}},
		{"double backtick span", "``[a](no.md) ` x`` [b](yes.md)", []L{{"yes.md", ""}}},
		{"fenced blocks left out", "```sh\n[a](no.md)\n```\n[b](yes.md)\n~~~\n[c](no2.md)\n~~~", []L{{"yes.md", ""}}},
		{"reference definition", "[ops]: docs/operations.md\n[web]: https://x", []L{{"docs/operations.md", ""}}},
		{"two on a line", "[a](a.md), [b](../b.md)", []L{{"a.md", ""}, {"../b.md", ""}}},
		{"unclosed", "[a](a.md", nil},
		{"empty", "[a]() [b](#)", nil},
		{"query cut", "[a](a.md?raw=1)", []L{{"a.md", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Links([]byte(tt.md)); !slices.Equal(got, tt.want) {
				t.Errorf("Links(%q) = %q, want %q", tt.md, got, tt.want)
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	md := "# The lab\n\n## Faults: `make demo-faults`\n\n```\n## not a heading\n<a id=\"fenced\"></a>\n```\n### The store's series ###\n## Notes\n## Notes\n#nospace\n<a id=\"schedule\"></a>\n"
	got := Anchors([]byte(md))
	for _, want := range []string{"the-lab", "faults-make-demo-faults", "the-stores-series", "notes", "notes-1", "schedule"} {
		if !got[want] {
			t.Errorf("Anchors: %q missing from %v", want, got)
		}
	}
	for _, not := range []string{"not-a-heading", "nospace", "notes-2", "fenced"} {
		if got[not] {
			t.Errorf("Anchors: %q must not be there: %v", not, got)
		}
	}
}

func FuzzLinks(f *testing.F) {
	for _, s := range []string{"[a](b.md)", "![x](<y z.png>)", "```\n[a](b)\n```", "`x` [a](b(c)d)", "[r]: x.md#y", "](", "[a](#f?x)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		for _, l := range Links([]byte(md)) {
			if l.Path == "" && l.Fragment == "" || strings.ContainsAny(l.Path, "#?\n") || strings.Contains(l.Fragment, "\n") || scheme.MatchString(l.Path) {
				t.Fatalf("Links(%q) returned %q", md, l)
			}
		}
		_ = Anchors([]byte(md))
	})
}

// TestDocsLinksResolve checks that every relative link and image of
// README.md and of the Markdown pages under docs/ names a file or
// directory that exists, and that a fragment of a Markdown page names one
// of its headings.
func TestDocsLinksResolve(t *testing.T) {
	root := testutil.ModuleRoot(t)
	pages := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("found only %d pages: %q", len(pages), pages)
	}
	links := 0
	for _, page := range pages {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, l := range Links(md) {
			links++
			p, err := url.PathUnescape(l.Path)
			if err != nil {
				t.Errorf("%s: link %q: %v", rel, l.Path, err)
				continue
			}
			target := filepath.Join(filepath.Dir(page), p)
			switch {
			case p == "":
				target = page
			case strings.HasPrefix(p, "/"): // GitHub reads "/x" from the repository's root
				target = filepath.Join(root, p)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %q points at nothing: %v", rel, l.Path, err)
				continue
			}
			if l.Fragment == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			body, err := os.ReadFile(target)
			if err != nil {
				t.Errorf("%s: link %q: %v", rel, l.Path, err)
				continue
			}
			if !Anchors(body)[l.Fragment] {
				tr, _ := filepath.Rel(root, target)
				t.Errorf("%s: link %q#%s: %s has no heading with that anchor", rel, l.Path, l.Fragment, tr)
			}
		}
	}
	if links < 20 {
		t.Errorf("found only %d relative links in %d pages: is Links reading them?", links, len(pages))
	}
}
