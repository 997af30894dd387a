package queue

import (
	"slices"
	"testing"
)

// TestTakeFront: a batch of at most limit from the front, the rest kept
// in order, an emptied queue nil, and the batch cannot grow into the
// queue.
func TestTakeFront(t *testing.T) {
	tests := []struct {
		name      string
		q         []int
		limit     int
		want, put []int // the batch, and what stays queued (nil: emptied)
	}{
		{"part", []int{1, 2, 3}, 2, []int{1, 2}, []int{3}},
		{"all", []int{1, 2, 3}, 3, []int{1, 2, 3}, nil},
		{"more than queued", []int{1}, 5, []int{1}, nil},
		{"empty", nil, 4, []int{}, nil},
		{"zero limit", []int{1}, 0, []int{}, []int{1}},
		{"negative limit", []int{1}, -1, []int{}, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := slices.Clone(tt.q)
			got := TakeFront(&q, tt.limit)
			if !slices.Equal(got, tt.want) || !slices.Equal(q, tt.put) || (tt.put == nil) != (q == nil) {
				t.Fatalf("TakeFront(%v, %d) = %v, left %v; want %v, left %v", tt.q, tt.limit, got, q, tt.want, tt.put)
			}
			if cap(got) != len(got) {
				t.Fatalf("the batch has room (cap %d, len %d): appending to it would overwrite the queue", cap(got), len(got))
			}
		})
	}
}

// TestPutLatest: the channel holds the value put last, whatever it held.
func TestPutLatest(t *testing.T) {
	tests := []struct {
		name string
		puts []int
	}{
		{"into an empty channel", []int{1}},
		{"replaces the one held", []int{1, 2}},
		{"many puts, last kept", []int{1, 2, 3, 4, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := make(chan int, 1)
			for _, v := range tt.puts {
				PutLatest(c, v)
			}
			if len(c) != 1 {
				t.Fatalf("channel holds %d values, want 1", len(c))
			}
			if got, want := <-c, tt.puts[len(tt.puts)-1]; got != want {
				t.Errorf("held %d, want %d", got, want)
			}
		})
	}
}
