package agent

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/servers"
)

// TestConfigTimeoutDefaults: validate fills in RegisterTimeout and the
// servers' linger bounds when they are zero, keeps them when set, and
// refuses negative ones.
func TestConfigTimeoutDefaults(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(c *Config)
		wantErr  string // substring; empty: no error
		wantReg  time.Duration
		wantMax  time.Duration
		wantIdle time.Duration
	}{
		{"zero means the defaults", func(*Config) {}, "", defaultRegisterTimeout, servers.DefaultLingerMax, servers.DefaultLingerIdle},
		{"set values kept", func(c *Config) {
			c.RegisterTimeout, c.ServerLingerMax, c.ServerLingerIdle = 300*time.Millisecond, time.Minute, time.Second
		}, "", 300 * time.Millisecond, time.Minute, time.Second},
		{"negative register timeout", func(c *Config) { c.RegisterTimeout = -time.Second }, "RegisterTimeout -1s is negative", 0, 0, 0},
		{"negative linger bound", func(c *Config) { c.ServerLingerMax = -time.Second }, "ServerLingerMax -1s", 0, 0, 0},
		{"negative linger idle", func(c *Config) { c.ServerLingerIdle = -time.Second }, "ServerLingerIdle -1s", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Coordinator: "127.0.0.1:1", NodeName: "node-1", HostIP: netip.MustParseAddr("127.0.0.1")}
			tt.edit(&c)
			err := c.validate()
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("validate() = %v, want an error with %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("validate() = %v", err)
			}
			if c.RegisterTimeout != tt.wantReg || c.ServerLingerMax != tt.wantMax || c.ServerLingerIdle != tt.wantIdle {
				t.Errorf("RegisterTimeout %v, ServerLingerMax %v, ServerLingerIdle %v; want %v, %v, %v",
					c.RegisterTimeout, c.ServerLingerMax, c.ServerLingerIdle, tt.wantReg, tt.wantMax, tt.wantIdle)
			}
		})
	}
}
