package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/signals"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    bool
		wantStdout string
	}{
		{"help", []string{"--help"}, false, "status"},
		{"bad prefix", []string{"status", "--prefix", "NO"}, true, ""},
		{"unknown command", []string{"launch"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			err := signals.Execute(ctx, NewCommand(&stdout, &stderr), tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Execute(%v) = %v, want error %v", tt.args, err, tt.wantErr)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tt.wantStdout)
			}
		})
	}
}
