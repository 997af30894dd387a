package tick

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

func TestRepeat(t *testing.T) {
	tests := []struct {
		name      string
		delays    []time.Duration // next's answers in turn; the last repeats
		cancelAt  int             // the call that cancels
		wantCalls int
		wantNexts int // next is asked before the first call and after each
	}{
		{"immediate, cancelled by the first call", []time.Duration{0}, 1, 1, 2},
		{"negative delay is at once", []time.Duration{-time.Second}, 2, 2, 3},
		{"jittered delays, cancelled by the third call", []time.Duration{time.Millisecond, 3 * time.Millisecond, 0}, 3, 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A zero delay leaves the timer ready together with ctx.Done:
			// many rounds catch a call made after the cancel.
			for round := range 50 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				calls, nexts := 0, 0
				Repeat(ctx, func() time.Duration {
					d := tt.delays[min(nexts, len(tt.delays)-1)]
					nexts++
					return d
				}, func() {
					calls++
					if calls == tt.cancelAt {
						cancel()
					}
				})
				cancel()
				if calls != tt.wantCalls || nexts != tt.wantNexts {
					t.Fatalf("round %d: calls = %d, nexts = %d; want %d, %d", round, calls, nexts, tt.wantCalls, tt.wantNexts)
				}
			}
		})
	}
}

func TestEveryRefusesNonPositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Every(%v) did not panic", d)
				}
			}()
			Every(context.Background(), d, func() {})
		}()
	}
}

// Until returns nil once cond holds, after as many calls as it took; if
// the context ends first, its error holds cond's last reason and wraps
// the context's.
func TestUntil(t *testing.T) {
	calls := 0
	err := Until(context.Background(), time.Millisecond, func() string {
		calls++
		if calls < 3 {
			return fmt.Sprintf("call %d", calls)
		}
		return ""
	})
	if err != nil || calls != 3 {
		t.Fatalf("Until = %v after %d calls, want nil after 3", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = Until(ctx, time.Millisecond, func() string {
		calls++
		if calls == 2 {
			cancel()
		}
		return fmt.Sprintf("still waiting (%d)", calls)
	})
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "still waiting (") {
		t.Fatalf("Until after cancel = %v, want the last reason wrapping context.Canceled", err)
	}
}

// Sleep returns nil after its delay, at once for a non-positive one, and
// the context's error when the context ends first.
func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep(1ms) = %v, want nil", err)
	}
	if err := Sleep(context.Background(), -time.Second); err != nil {
		t.Errorf("Sleep(-1s) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(1h) on a canceled context = %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(0) on a canceled context = %v, want context.Canceled", err)
	}
}
