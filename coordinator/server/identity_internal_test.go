package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/lograte"
)

// TestWarnRefusedRateLimit: a flood of refused registrations logs the
// burst of lograte.Bucket, then one a second counting those suppressed,
// so a flood of made-up tokens cannot flood the log.
func TestWarnRefusedRateLimit(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&buf, nil)), Now: func() time.Time { return now }})
	for range 1000 {
		s.warnRefused("node-b", "", "127.0.0.1:1", "identity token is not a JWT")
	}
	now = now.Add(time.Second)
	s.warnRefused("node-b", "", "127.0.0.1:1", "identity token is not a JWT")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != lograte.Burst+1 || !strings.Contains(lines[len(lines)-1], "suppressed=990") {
		t.Fatalf("%d warnings, want %d, the last with suppressed=990:\n%s", len(lines), lograte.Burst+1, buf.String())
	}
}
