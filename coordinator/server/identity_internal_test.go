package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// flood is n refusal times, all at at.
func flood(n int, at time.Duration) []time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		ts[i] = at
	}
	return ts
}

// every is n refusal times, one each d from 0.
func every(n int, d time.Duration) []time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		ts[i] = time.Duration(i) * d
	}
	return ts
}

// TestWarnRefusedRateLimit: past a burst of ten, refusal warnings are
// logged at most one a second, the next one logged carrying the count of
// those suppressed, so a flood of made-up tokens cannot flood the log.
func TestWarnRefusedRateLimit(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		at    []time.Duration // the refusals, after start
		want  int             // warnings logged
		count string          // the last warning's suppressed attribute
	}{
		{"one", []time.Duration{0}, 1, "suppressed=0"},
		{"the burst", flood(10, 0), 10, "suppressed=0"},
		{"a flood", flood(1000, 0), 10, "suppressed=0"},
		{"a flood, then one a second later", append(flood(1000, 0), time.Second), 11, "suppressed=990"},
		{"a flood, then two a second later", append(flood(1000, 0), time.Second, time.Second+1), 11, "suppressed=990"},
		{"a flood, then a flood a second later", append(flood(1000, 0), flood(1000, time.Second)...), 11, "suppressed=990"},
		{"a flood each second", append(append(flood(1000, 0), flood(1000, time.Second)...), flood(1000, 2*time.Second)...), 12, "suppressed=999"},
		{"one a second", every(30, time.Second), 30, "suppressed=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			now := start
			s := New(Config{Logger: slog.New(slog.NewTextHandler(&buf, nil)), Now: func() time.Time { return now }})
			for _, d := range tt.at {
				now = start.Add(d)
				s.warnRefused("node-b", "", "127.0.0.1:1", "identity token is not a JWT")
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != tt.want {
				t.Fatalf("%d warnings, want %d:\n%s", len(lines), tt.want, buf.String())
			}
			if last := lines[len(lines)-1]; !strings.Contains(last, tt.count) {
				t.Errorf("last warning %q, want %s", last, tt.count)
			}
		})
	}
}
