package runner

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestCurlPinReview: URLs whose host curl reads otherwise than Go are
// refused, and every accepted one carries the catch-all --connect-to pin
// besides --resolve, so that curl connects to the resolved address
// whatever host it makes of the URL.
func TestCurlPinReview(t *testing.T) {
	spec := normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP})
	for _, tt := range []struct {
		url, ip string
		want    []string // the arguments after the options
		wantErr string
	}{
		// curl reads these as 127.0.0.1 and ignores --resolve for them.
		{"http://0x7f.1/", "192.0.2.7", nil, `host "0x7f.1" is neither an IP address nor a DNS name`},
		{"http://0x7f000001:8080/", "192.0.2.7", nil, "looks like a number"},
		{"http://a.0/", "192.0.2.7", nil, "looks like a number"},
		{"http://web.example.com/", "192.0.2.7", []string{"--resolve", "web.example.com:80:192.0.2.7", "--connect-to", "::192.0.2.7:", "http://web.example.com/"}, ""},
		{"https://web.example.com./x", "2001:db8::7", []string{"--resolve", "web.example.com.:443:[2001:db8::7]", "--connect-to", "::[2001:db8::7]:", "https://web.example.com./x"}, ""},
		{"http://192.0.2.7:81/", "192.0.2.7", []string{"--connect-to", "::192.0.2.7:", "http://192.0.2.7:81/"}, ""},
		// No link-local resolved address, whatever the caller checked.
		{"http://web.example.com/", "169.254.169.254", nil, "link-local"},
	} {
		t.Run(tt.url+" "+tt.ip, func(t *testing.T) {
			cmd, err := curlExternalCommand(spec, tt.url, netip.MustParseAddr(tt.ip), "")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.url) {
					t.Fatalf("error %v, want one naming %q with %q (argv %s)", err, tt.url, tt.wantErr, cmd)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			opts := len(curlOptions(spec))
			if got := cmd.Args[opts:]; !slices.Equal(got, tt.want) {
				t.Errorf("args after the options %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCurlExternalReal runs the real curl in a throwaway network namespace
// (only its lo: no packet, DNS query included, can leave it) against a
// server on 127.0.0.2 there: the pinned request reaches it with the URL's
// Host; a URL whose host curl reads as 127.0.0.1 still reaches 127.0.0.2
// through the catch-all --connect-to; a redirect is not followed; and
// neither proxy variables nor a .curlrc in the environment change where
// curl goes.
func TestCurlExternalReal(t *testing.T) {
	testnet.Need(t, "curl")
	ns := testnet.NewNetNS(t, "mp-extcurl")
	port := int(testnet.FreePort(t))
	type hit struct{ local, host, path string }
	var mu sync.Mutex
	var hits []hit
	serve := func(ip string) {
		l, err := netns.Listen(ns, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits = append(hits, hit{ip, r.Host, r.URL.Path})
			mu.Unlock()
			if r.URL.Path == "/redirect" {
				http.Redirect(w, r, fmt.Sprintf("http://127.0.0.3:%d/elsewhere", port), http.StatusFound)
				return
			}
			_, _ = fmt.Fprintln(w, "ok")
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	for _, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		serve(ip) // .1 curl's own idea, .3 the redirect, .4 the proxy
	}
	// A proxy and a .curlrc that would send curl to 127.0.0.4.
	home := t.TempDir()
	rc := fmt.Sprintf("proxy = \"http://127.0.0.4:%d\"\nlocation\n", port)
	if err := os.WriteFile(filepath.Join(home, ".curlrc"), []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, fmt.Sprintf("http://127.0.0.4:%d", port))
	}
	t.Setenv("HOME", home)
	t.Setenv("CURL_HOME", home)
	t.Setenv("NO_PROXY", "")

	spec := normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP})
	pinned := netip.MustParseAddr("127.0.0.2")
	run := func(t *testing.T, cmd proc.Command) []*measurev1.Result {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := proc.Run(ctx, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return curlResults(spec, out)
	}
	take := func() []hit {
		mu.Lock()
		defer mu.Unlock()
		h := hits
		hits = nil
		return h
	}
	t.Run("pinned", func(t *testing.T) {
		u := fmt.Sprintf("http://web.example.test:%d/path", port)
		cmd, err := curlExternalCommand(spec, u, pinned, ns)
		if err != nil {
			t.Fatal(err)
		}
		res := run(t, cmd)
		want := []hit{{"127.0.0.2", fmt.Sprintf("web.example.test:%d", port), "/path"}}
		if got := take(); len(res) != 1 || res[0].GetStatus() != measurev1.Status_STATUS_OK || !slices.Equal(got, want) {
			t.Fatalf("results %v, requests %v; want OK and %v", res, got, want)
		}
	})
	t.Run("host curl reads as an IPv4 address", func(t *testing.T) {
		// curlPin refuses this URL; the catch-all alone must hold.
		u := fmt.Sprintf("http://0x7f.1:%d/path", port)
		args := append(curlOptions(spec), connectTo(pinned)...)
		res := run(t, proc.Command{Name: "curl", Args: append(args, u), NetNS: ns})
		if got := take(); len(res) != 1 || len(got) != 1 || got[0].local != "127.0.0.2" {
			t.Fatalf("results %v, requests %v; want one request on 127.0.0.2", res, got)
		}
	})
	t.Run("redirect not followed", func(t *testing.T) {
		u := fmt.Sprintf("http://web.example.test:%d/redirect", port)
		cmd, err := curlExternalCommand(spec, u, pinned, ns)
		if err != nil {
			t.Fatal(err)
		}
		res := run(t, cmd)
		got := take()
		if len(res) != 1 || res[0].GetStatus() != measurev1.Status_STATUS_TOOL_ERROR || len(got) != 1 || got[0].local != "127.0.0.2" {
			t.Fatalf("results %v, requests %v; want TOOL_ERROR (302) and one request on 127.0.0.2", res, got)
		}
	})
}
