package probe

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestAlarm: a wait returns when the alarm goes off, at once when it was
// rung before the wait, when it is rung during the wait, and with an
// error once it is closed.
func TestAlarm(t *testing.T) {
	a, err := newAlarm()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		arm  func()
	}{
		{"set", func() { a.set(time.Millisecond) }},
		{"rung before the wait", func() { a.set(time.Hour); a.ring() }},
		{"rung during the wait", func() {
			a.set(time.Hour)
			go func() { time.Sleep(5 * time.Millisecond); a.ring() }() // ends by itself
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.arm()
			done := make(chan error, 1)
			go func() { done <- a.wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("wait: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("wait did not return within 5 s")
			}
		})
	}
	a.set(time.Hour)
	done := make(chan error, 1)
	go func() { done <- a.wait() }()
	time.Sleep(5 * time.Millisecond)
	a.close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("wait on a closed alarm returned nil")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return within 5 s of close")
	}
}

// TestExpiries: pop gives the timeouts pushed in order, earliest first.
func TestExpiries(t *testing.T) {
	base := time.Now()
	for _, n := range []int{0, 1, 2, 7, 100} {
		var h expiries
		var want []time.Time
		for i := range n {
			at := base.Add(time.Duration(rand.IntN(50)) * time.Millisecond)
			want = append(want, at)
			h.push(expiry{at: at, tcp: uint32(i)})
		}
		slices.SortFunc(want, func(a, b time.Time) int { return a.Compare(b) })
		for i, w := range want {
			if got := h.pop().at; !got.Equal(w) {
				t.Fatalf("n=%d: pop %d gave %v, want %v", n, i, got.Sub(base), w.Sub(base))
			}
		}
		if len(h) != 0 {
			t.Errorf("n=%d: %d left after popping every one", n, len(h))
		}
	}
}
