package lograte

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// flood is n warning times, all at at.
func flood(n int, at time.Duration) []time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		ts[i] = at
	}
	return ts
}

// every is n warning times, one each d from 0.
func every(n int, d time.Duration) []time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		ts[i] = time.Duration(i) * d
	}
	return ts
}

// TestBucket: past a burst of ten, warnings are logged at most one a
// second, the next one logged carrying the count of those suppressed, so
// a flood of refusals cannot flood the log.
func TestBucket(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		at    []time.Duration // the warnings, after start
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
			log := slog.New(slog.NewTextHandler(&buf, nil))
			var b Bucket
			for _, d := range tt.at {
				b.Warn(log, start.Add(d), "refused", "reason", "identity token is not a JWT")
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
