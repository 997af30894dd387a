package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/signals"
	"github.com/meshperf/meshperf/internal/testnet"
)

// TestRunFlags: a bad address or port is refused at startup, by an error
// that names the flag and the value, before the agent listens or dials.
func TestRunFlags(t *testing.T) {
	dir := t.TempDir()
	goodGossipKeys, badGossipKeys := filepath.Join(dir, "good.key"), filepath.Join(dir, "bad.key")
	for f, content := range map[string]string{
		goodGossipKeys: base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n",
		badGossipKeys:  base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n" + base64.StdEncoding.EncodeToString([]byte("short")) + "\n",
	} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		args   []string // over a valid command line on 127.0.0.1
		wantIn []string // "": Run returns nil once its context ends
	}{
		{"loopback host IP", nil, nil},
		{"IPv6 loopback host IP", []string{"--host-ip", "::1"}, nil},
		{"dual-stack host IP", []string{"--host-ip", "127.0.0.1,::1"}, nil},
		{"dual-stack host IP, IPv6 first", []string{"--host-ip", "::1,127.0.0.1"}, nil},
		{"two IPv4 host IPs", []string{"--host-ip", "127.0.0.1,127.0.0.2"}, []string{"--host-ip", "127.0.0.1,127.0.0.2", "same family"}},
		{"three host IPs", []string{"--host-ip", "127.0.0.1,::1,127.0.0.2"}, []string{"--host-ip", "at most two"}},
		{"iperf3 port above 65535", []string{"--iperf3-port", "70000"}, []string{"--iperf3-port", "70000"}},
		{"qperf port above 65535", []string{"--qperf-port", "65536"}, []string{"--qperf-port", "65536"}},
		{"qperf data port above 65535", []string{"--qperf-data-port", "4294967295"}, []string{"--qperf-data-port", "4294967295"}},
		{"HTTP port above 65535", []string{"--http-port", "70000"}, []string{"--http-port", "70000"}},
		{"HTTP port 0", []string{"--http-port", "0"}, []string{"--http-port", "0"}},
		{"iperf3 port 0", []string{"--iperf3-port", "0"}, []string{"--iperf3-port", "0"}},
		{"qperf data port = qperf port", []string{"--qperf-port", "7001", "--qperf-data-port", "7001"},
			[]string{"--qperf-data-port", "--qperf-port", "7001"}},
		{"HTTP port = iperf3 port", []string{"--http-port", "7002", "--iperf3-port", "7002"},
			[]string{"--http-port", "--iperf3-port", "7002"}},
		{"HTTP port = qperf port", []string{"--http-port", "7003", "--qperf-port", "7003"},
			[]string{"--http-port", "--qperf-port", "7003"}},
		{"HTTP port = qperf data port", []string{"--http-port", "7004", "--qperf-data-port", "7004"},
			[]string{"--http-port", "--qperf-data-port", "7004"}},
		{"gossip port above 65535", []string{"--gossip-port", "65536"}, []string{"--gossip-port", "65536"}},
		{"gossip port = HTTP port", []string{"--http-port", "7005", "--gossip-port", "7005"}, []string{"--gossip-port", "--http-port", "7005"}},
		{"gossip off", []string{"--gossip-port", "0"}, nil},
		{"unspecified host IP", []string{"--host-ip", "0.0.0.0"}, []string{"--host-ip", `"0.0.0.0"`, "unspecified"}},
		{"unspecified IPv6 host IP", []string{"--host-ip", "::"}, []string{"--host-ip", `"::"`}},
		{"multicast host IP", []string{"--host-ip", "224.0.0.1"}, []string{"--host-ip", "224.0.0.1", "multicast"}},
		{"broadcast host IP", []string{"--host-ip", "255.255.255.255"}, []string{"--host-ip", "255.255.255.255", "broadcast"}},
		{"IPv4-mapped host IP", []string{"--host-ip", "::ffff:127.0.0.1"}, []string{"--host-ip", "::ffff:127.0.0.1"}},
		{"zoned host IP", []string{"--host-ip", "fe80::1%lo"}, []string{"--host-ip", "fe80::1%lo"}},
		{"host IP not an IP", []string{"--host-ip", "node-1"}, []string{"--host-ip", "node-1"}},
		{"multicast pod IP", []string{"--pod-ip", "ff02::1", "--pod-netns", "/run/netns/nonexistent"}, []string{"--pod-ip", "ff02::1"}},
		{"endpoint socket with pod netns", []string{"--endpoint-socket", "/nonexistent/endpoint.sock", "--pod-netns", "/run/netns/x", "--pod-ip", "10.0.0.1"},
			[]string{"--endpoint-socket", "--pod-netns", "--pod-ip", "exclude each other"}},
		{"endpoint socket with pod IP only", []string{"--endpoint-socket", "/nonexistent/endpoint.sock", "--pod-ip", "10.0.0.1"},
			[]string{"--endpoint-socket", "--pod-ip", "exclude each other"}},
		{"unspecified service IP", []string{"--service-ip", "0.0.0.0"}, []string{"--service-ip", "0.0.0.0"}},
		{"broadcast service IP", []string{"--service-ip", "255.255.255.255"}, []string{"--service-ip", "255.255.255.255"}},
		{"allow-target CIDR", []string{"--allow-target", "10.0.0.0/8"}, nil},
		{"allow-target host", []string{"--allow-target", "192.0.2.7", "--allow-target", "2001:db8::1"}, nil},
		{"allow-target with host bits", []string{"--allow-target", "10.0.0.5/8"}, []string{"--allow-target", "10.0.0.5/8", "10.0.0.0/8"}},
		{"allow-target not an address", []string{"--allow-target", "node-2"}, []string{"--allow-target", "node-2"}},
		{"external-cidr", []string{"--external-cidr", "203.0.113.0/24", "--external-cidr", "198.51.100.7"}, nil},
		{"external-cidr with host bits", []string{"--external-cidr", "203.0.113.5/24"}, []string{"--external-cidr", "203.0.113.5/24", "203.0.113.0/24"}},
		{"external-cidr not an address", []string{"--external-cidr", "lb.example.com"}, []string{"--external-cidr", "lb.example.com"}},
		{"TLS cert without key and CA", []string{"--tls-cert", "/x.crt"}, []string{"--tls-cert given without --tls-key, --tls-ca"}},
		{"gossip key file missing", []string{"--gossip-key-file", "/nonexistent/gossip.key"}, []string{"--gossip-key-file", "/nonexistent/gossip.key"}},
		{"gossip key file with a bad key", []string{"--gossip-key-file", badGossipKeys}, []string{"--gossip-key-file", badGossipKeys, "line 2", "a key of 5 bytes"}},
		{"gossip key file", []string{"--gossip-key-file", goodGossipKeys}, nil},
		{"TLS files unreadable", []string{"--tls-cert", "/nonexistent/x.crt", "--tls-key", "/nonexistent/x.key", "--tls-ca", "/nonexistent/ca.crt"},
			[]string{"TLS certificate", "/nonexistent/x.crt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := func() string { return fmt.Sprint(testnet.FreePort(t)) }
			args := []string{
				"--coordinator", "unix://" + filepath.Join(t.TempDir(), "none.sock"), "--node", "node-1", "--host-ip", "127.0.0.1",
				"--http-port", port(), "--iperf3-port", port(), "--qperf-port", port(), "--qperf-data-port", port(), "--gossip-port", port(),
			}
			args = append(args, tt.args...) // a repeated flag: the last one counts
			ctx, cancel := context.WithCancel(context.Background())
			if tt.wantIn != nil {
				// A config that wrongly passes runs until this ends.
				ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
			} else {
				cancel() // a good config returns nil once its context is over
			}
			defer cancel()
			var stderr bytes.Buffer
			err := signals.Execute(ctx, NewCommand(&bytes.Buffer{}, &stderr), args)
			switch {
			case tt.wantIn == nil && err != nil:
				t.Errorf("run = %v, want nil", err)
			case tt.wantIn != nil && err == nil:
				t.Errorf("run = nil, want an error naming %q", tt.wantIn)
			}
			for _, w := range tt.wantIn {
				if err != nil && !strings.Contains(err.Error(), w) {
					t.Errorf("run = %v, want an error containing %s", err, w)
				}
			}
		})
	}
}

// TestEndpointCommand: `agent endpoint` takes --socket, keeps trying while
// no agent listens, and returns nil when its context ends (SIGTERM).
func TestEndpointCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var stderr bytes.Buffer
	sock := filepath.Join(t.TempDir(), "endpoint.sock")
	if err := signals.Execute(ctx, NewCommand(&bytes.Buffer{}, &stderr), []string{"endpoint", "--socket", sock}); err != nil {
		t.Errorf("run endpoint = %v, want nil", err)
	}
	if !strings.Contains(stderr.String(), sock) {
		t.Errorf("log does not name the socket %s:\n%s", sock, stderr.String())
	}
}
