package protocol

import (
	"net/url"
	"strings"
	"testing"
)

// TestCheckHTTPURL: the rule every http URL meshperf takes follows.
func TestCheckHTTPURL(t *testing.T) {
	for _, tt := range []struct {
		raw, wantErr string // "" for none
	}{
		{"http://h.example/x", ""},
		{"https://192.0.2.7:8443/", ""},
		{"http://[2001:db8::1]:80/p?q=1", ""},
		{"ftp://h.example/", `scheme "ftp": want http or https`},
		{"h.example:80", "want http or https"},
		{"http:h.example", "not an absolute URL with a host"},
		{"http:///x", "not an absolute URL with a host"},
		{"http://:80/x", "not an absolute URL with a host"},
		{"http://u:p@h.example/", "user information is not allowed"},
		{"http://h.example/#f", "a fragment is not allowed"},
		{"http://h.example/#", "a fragment is not allowed"},
		{"http://h.example:0/", `port "0": want 1..65535`},
		{"http://h.example:65536/", `port "65536": want 1..65535`},
		{"http://h.example:080/", `port "080": want 1..65535`},
		{"http://h.example:/", "empty port"},
	} {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", tt.raw, err)
		}
		err = CheckHTTPURL(u, tt.raw)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("CheckHTTPURL(%q) = %v, want nil", tt.raw, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("CheckHTTPURL(%q) = %v, want an error containing %q", tt.raw, err, tt.wantErr)
		}
	}
}
