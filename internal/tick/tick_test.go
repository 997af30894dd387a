package tick

import (
	"context"
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	tests := []struct {
		name      string
		cancelAt  int // the call that cancels; 0: cancel before Every
		wantCalls int
	}{
		{"cancelled before", 0, 0},
		{"cancelled by the first call", 1, 1},
		{"cancelled by the third call", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tt.cancelAt == 0 {
				cancel()
			}
			calls := 0
			Every(ctx, time.Millisecond, func() {
				calls++
				if calls == tt.cancelAt {
					cancel()
				}
			})
			if calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
		})
	}
}
