package webui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
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
		fmt.Fprint(w, body)
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
