package testutil

import (
	"context"
	"testing"
)

// TestReturns: Returns gives f's answer when f returns, and fails
// fatally, with the zero value, when f is still blocked as ctx ends.
func TestReturns(t *testing.T) {
	for _, tt := range []struct {
		name      string
		blocks    bool
		want      int
		wantFatal int
	}{{"returns", false, 7, 0}, {"blocked", true, 0, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			unblock := make(chan struct{})
			done := make(chan struct{})
			f := func() int {
				defer close(done)
				if tt.blocks {
					cancel() // the context ends while f is blocked
					<-unblock
				}
				return 7
			}
			r := &recorder{TB: t}
			got := Returns(r, ctx, "f", f)
			cancel()
			close(unblock)
			<-done // f's goroutine ends before the test does
			if got != tt.want || r.fatals != tt.wantFatal {
				t.Errorf("Returns = %d with %d fatal failures, want %d with %d", got, r.fatals, tt.want, tt.wantFatal)
			}
		})
	}
}
