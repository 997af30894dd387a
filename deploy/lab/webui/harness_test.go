package webui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// TestHarnessCatchesProblems: the browser harness that every page test
// relies on sees what it must fail on (a console.error, an uncaught
// exception, a rejected promise, a failed request, a request off
// loopback) and nothing on a clean page, and a page that never sets
// data-ready fails to load.
func TestHarnessCatchesProblems(t *testing.T) {
	requireChromium(t)
	page := func(script string) string {
		return `<!doctype html><html><head><title>t</title><link rel="icon" href="data:,"></head><body><main id="main">x</main><script>` + script +
			`;document.body.setAttribute("data-ready","1")</script></body></html>`
	}
	pages := map[string]string{
		"/clean":     page(`console.log("fine")`),
		"/error":     page(`console.error("boom", 42)`),
		"/throw":     `<!doctype html><link rel="icon" href="data:,"><body><script>document.body.setAttribute("data-ready","1");throw new Error("thrown")</script></body>`,
		"/reject":    page(`Promise.reject(new Error("rejected"))`),
		"/fetch404":  page(`fetch("/missing")`),
		"/offhost":   page(`new Image().src="http://localhost:1/x.png"`),
		"/neverdone": `<!doctype html><link rel="icon" href="data:,"><body>no data</body>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprint(w, body)
	}))
	defer srv.Close()
	b := startBrowser(t, 2*time.Minute)
	cases := []struct {
		path    string
		want    string // a problem containing it; "" means none
		noReady bool
	}{
		{"/clean", "", false},
		{"/error", "console.error: boom 42", false},
		{"/throw", "uncaught exception", false},
		{"/reject", "uncaught exception", false},
		{"/fetch404", "404", false},
		{"/offhost", "request off loopback: http://localhost:1/x.png", false},
		{"/neverdone", "", true},
	}
	for _, tt := range cases {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			tb := b.newTab(t, 30*time.Second)
			_, err := tb.load(srv.URL+tt.path, 3*time.Second)
			if tt.noReady != (err != nil) {
				t.Fatalf("load: %v, want an error: %v", err, tt.noReady)
			}
			time.Sleep(300 * time.Millisecond) // late events (the image, the rejection)
			got := tb.takeProblems()
			if tt.want == "" {
				if len(got) > 0 {
					t.Errorf("problems %q, want none", got)
				}
				return
			}
			if !strings.Contains(strings.Join(got, "\n"), tt.want) {
				t.Errorf("problems %q, want one with %q", got, tt.want)
			}
		})
	}
}

// TestHarnessKeyboard: the Tab walk finds every control of a page built
// like the UI (nav links, a select, a mesh with a roving tabindex), and
// names a control Tab cannot reach (inside an inert subtree) and one
// whose focus is invisible; the arrow keys and Enter work in the mesh.
func TestHarnessKeyboard(t *testing.T) {
	requireChromium(t)
	fake, err := os.ReadFile("testdata/fake-mesh.html")
	if err != nil {
		t.Fatal(err)
	}
	extra := map[string]string{
		"good":      "",
		"inert":     `<div inert><button id="trapped">x</button></div>`,
		"invisible": `<button id="plain" class="nofocus">y</button>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/pair" {
			_, _ = fmt.Fprint(w, `<!doctype html><link rel="icon" href="data:,"><body data-ready="1">pair</body>`)
			return
		}
		x, ok := extra[r.URL.Query().Get("case")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = fmt.Fprint(w, strings.Replace(string(fake), "<!--EXTRA-->", x, 1))
	}))
	defer srv.Close()
	b := startBrowser(t, 2*time.Minute)
	cases := []struct {
		name                  string
		controls              int
		wantMissed, wantInvis string
	}{
		{"good", 5, "", ""},
		{"inert", 6, "button#trapped", ""},
		{"invisible", 6, "", "button#plain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tt := b.newTab(t, 60*time.Second)
			if _, err := tt.load(srv.URL+"/mesh?case="+tc.name, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			controls, missed, invisible := tabWalk(t, tt)
			if len(controls) != tc.controls {
				t.Errorf("controls %v, want %d", controls, tc.controls)
			}
			if got := strings.Join(missed, ","); got != tc.wantMissed {
				t.Errorf("missed %q, want %q", got, tc.wantMissed)
			}
			if got := strings.Join(invisible, ","); got != tc.wantInvis {
				t.Errorf("invisible focus %q, want %q", got, tc.wantInvis)
			}
			if tc.name == "good" {
				meshArrows(t, tt)
			}
		})
	}
}
