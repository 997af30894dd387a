package gossip_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/gossip"
	"github.com/meshperf/meshperf/internal/testutil"
)

// key is a base64 key of n bytes, all b.
func key(b byte, n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n)) }

// keyFile writes lines into a new key file.
func keyFile(t *testing.T, lines ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "gossip.key")
	writeKeys(t, f, lines...)
	return f
}

// writeKeys replaces f with lines, by a rename as the kubelet swaps a
// Secret volume's files.
func writeKeys(t *testing.T, f string, lines ...string) {
	t.Helper()
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
}

func TestParseKeys(t *testing.T) {
	k1, k2, k3 := key(1, 32), key(2, 16), key(3, 24)
	for _, tt := range []struct {
		name     string
		content  string
		wantKeys int
		wantErr  string // "" for none
	}{
		{"one key", k1 + "\n", 1, ""},
		{"no newline", k1, 1, ""},
		{"keys of every size, comments, blank lines", "# primary\n" + k1 + "\n\n  " + k2 + "  \n" + k3 + "\n", 3, ""},
		{"a key listed twice is kept once", k1 + "\n" + k1 + "\n", 1, ""},
		{"empty", "", 0, "gossip key file F: no key"},
		{"comments only", "# nothing\n", 0, "no key"},
		{"not base64", k1 + "\nnot a key!\n", 0, "gossip key file F: line 2: not base64"},
		{"a key of 20 bytes", k1 + "\n" + key(4, 20) + "\n", 0, "line 2: a key of 20 bytes: want 16, 24 or 32"},
		{"hex of 32 bytes, not base64", "\n\n" + strings.Repeat("ab", 32) + "\n", 0, "line 3: a key of 48 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := gossip.ParseKeys("F", []byte(tt.content))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err = %v; want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, gossip.ErrKeyFile)):
				t.Fatalf("err = %v; want %q, wrapping ErrKeyFile", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), k1):
				t.Errorf("err = %v names a key", err)
			}
			if len(keys) != tt.wantKeys {
				t.Errorf("%d keys, want %d", len(keys), tt.wantKeys)
			}
		})
	}
}

// TestEncryptedLoopback runs two members on the real transport, on
// loopback, with key files: they join when they share the key the joiner
// encrypts with and the other can decrypt, and not otherwise.
func TestEncryptedLoopback(t *testing.T) {
	k1, k2 := key(1, 32), key(2, 32)
	for _, tt := range []struct {
		name     string
		a, b     []string // key file lines; nil: no key file (plaintext)
		wantJoin bool
	}{
		{"same key", []string{k1}, []string{k1}, true},
		{"different keys", []string{k1}, []string{k2}, false},
		{"keyed and plaintext", []string{k1}, nil, false},
		{"plaintext and keyed", nil, []string{k1}, false},
		{"mid rotation: primaries differ, each holds the other", []string{k1, k2}, []string{k2, k1}, true},
		{"the joiner's primary unknown to the other", []string{k1}, []string{k2, k1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a := loopbackMember(t, "node-a", tt.a)
			b := loopbackMember(t, "node-b", tt.b)
			n, err := b.Join(ctx, []string{a.Addr().String()})
			if tt.wantJoin {
				if err != nil || n != 1 {
					t.Fatalf("join: %d, %v; want joined", n, err)
				}
				for _, g := range []*gossip.Gossip{a, b} {
					testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "both alive", func() bool { return allAlive(g, 2) })
				}
				return
			}
			if err == nil {
				t.Fatalf("join: %d, %v; want refused", n, err)
			}
			if got := len(a.Members()); got != 1 {
				t.Errorf("node-a knows %d members after a refused join; want itself only", got)
			}
		})
	}
}

// loopbackMember starts a member on 127.0.0.1 with a key file of lines
// (none if nil), closed when the test ends.
func loopbackMember(t *testing.T, name string, lines []string) *gossip.Gossip {
	t.Helper()
	cfg := gossip.Config{NodeName: name, BindAddr: netip.MustParseAddr("127.0.0.1"), Logger: testutil.Logger(t), ReconnectInterval: -1}
	if lines != nil {
		cfg.KeyFile = keyFile(t, lines...)
	}
	g, err := gossip.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// TestKeyRotation: a member reads its key file again while it runs: a bad
// new file keeps the keys in use (with a warning), a good one takes
// effect, and two members that did not share a key then join.
func TestKeyRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k1, k2 := key(1, 32), key(2, 32)
	logs := &testutil.SyncBuffer{}
	file := keyFile(t, k1)
	a, err := gossip.New(gossip.Config{NodeName: "node-a", BindAddr: netip.MustParseAddr("127.0.0.1"), ReconnectInterval: -1,
		KeyFile: file, KeyCheckInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	b := loopbackMember(t, "node-b", []string{k2})
	if _, err := b.Join(ctx, []string{a.Addr().String()}); err == nil {
		t.Fatal("joined without a shared key")
	}
	writeKeys(t, file, "not a key")
	testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "a warning on the bad file", func() bool {
		return strings.Contains(logs.String(), `msg="gossip key file changed but cannot be used; keeping the keys in use until it changes again"`) &&
			strings.Contains(logs.String(), "line 1: not base64")
	})
	writeKeys(t, file, k2, k1) // k2 primary, k1 still accepted
	testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "the keys reloaded", func() bool { return strings.Contains(logs.String(), `msg="gossip keys reloaded"`) })
	if n, err := b.Join(ctx, []string{a.Addr().String()}); err != nil || n != 1 {
		t.Fatalf("join after the rotation: %d, %v", n, err)
	}
	testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "both alive", func() bool { return allAlive(a, 2) && allAlive(b, 2) })
}

func TestNewRefusesBadKeyFile(t *testing.T) {
	for _, tt := range []struct {
		name    string
		file    func(t *testing.T) string
		wantErr string
	}{
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none") }, "no such file"},
		{"bad key", func(t *testing.T) string { return keyFile(t, key(1, 32), key(2, 8)) }, "line 2: a key of 8 bytes"},
		{"empty", func(t *testing.T) string { return keyFile(t) }, "no key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.file(t)
			g, err := gossip.New(gossip.Config{NodeName: "n", BindAddr: netip.MustParseAddr("127.0.0.1"), KeyFile: f})
			if err == nil {
				_ = g.Close()
				t.Fatal("started with a bad key file")
			}
			if !errors.Is(err, gossip.ErrKeyFile) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), f) {
				t.Errorf("err = %v; want ErrKeyFile naming %s and %q", err, f, tt.wantErr)
			}
		})
	}
}
