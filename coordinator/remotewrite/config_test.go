package remotewrite

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		wantErr string // "" for none
	}{
		{"http://127.0.0.1:8428/api/v1/write", ""},
		{"https://mimir.example/api/v1/push", ""},
		{"http://[::1]:9090/api/v1/write", ""},
		{"", `--remote-write "": scheme "": want http or https`},
		{"127.0.0.1:8428", `--remote-write "127.0.0.1:8428"`},
		{"ftp://host/x", `scheme "ftp": want http or https`},
		{"http:///api/v1/write", "not an absolute URL with a host"},
		{"http://:8428/api/v1/write", "not an absolute URL with a host"},
		{"http://u:p@host/api", "user info"},
		{"http://host/api#frag", "fragment"},
		{"http://host:0/api", `port "0": want 1..65535`},
		{"http://host:/api", "empty port"},
		{"http://host:70000/api", `port "70000"`},
		{"http://host:08428/api", `port "08428"`},
		{"http://host:x/api", `--remote-write "http://host:x/api"`},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			_, err := ParseURL("remote-write", tc.raw)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("ParseURL(%q): %v", tc.raw, err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("ParseURL(%q) took it, want an error with %q", tc.raw, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("ParseURL(%q): %v, want it to contain %q", tc.raw, err, tc.wantErr)
			}
		})
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8428/api/v1/write", "https://h/x", "", "ftp://h", "http://u@h", "http://h:0", "http://[::1]:1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseURL("remote-write", raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--remote-write ") {
				t.Fatalf("error %q does not name the flag", err)
			}
			return
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "" || u.User != nil {
			t.Fatalf("ParseURL(%q) took %#v", raw, u)
		}
		if _, err := url.Parse(u.String()); err != nil {
			t.Fatalf("accepted %q does not parse again: %v", raw, err)
		}
		if _, err := New(Config{URL: raw, QueueSamples: 1}); err != nil {
			t.Fatalf("ParseURL took %q, New refused it: %v", raw, err)
		}
	})
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	empty, bad := filepath.Join(dir, "empty"), filepath.Join(dir, "bad.pem")
	for _, p := range []string{empty, bad} {
		if err := os.WriteFile(p, []byte("\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tokenFile := testutil.TokenFile(t, "s3cret")
	const u = "http://127.0.0.1:1/api/v1/write"
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"bad URL", Config{URL: "tcp://x"}, `--remote-write "tcp://x"`},
		{"negative queue", Config{URL: u, QueueSamples: -1}, "--remote-write-queue-samples -1"},
		{"missing token file", Config{URL: u, BearerTokenFile: filepath.Join(dir, "nope")}, "--remote-write-bearer-token-file"},
		{"empty token file", Config{URL: u, BearerTokenFile: empty}, "empty"},
		{"missing CA file", Config{URL: u, CAFile: filepath.Join(dir, "nope")}, "--remote-write-ca-file"},
		{"CA file without PEM", Config{URL: u, CAFile: bad}, "no PEM certificate"},
		{"backoff bounds", Config{URL: u, MinBackoff: 2, MaxBackoff: 1}, "MaxBackoff"},
		{"token over plain http", Config{URL: "http://vm.example:8428/api/v1/write", BearerTokenFile: tokenFile}, "would cross the network in clear"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
