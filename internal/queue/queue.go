// Package queue owns the one way meshperf takes work off an in-memory
// slice queue guarded by its owner's lock (a batch from the front, the
// emptied queue's array freed), and the one way it keeps only the latest
// value on a channel.
package queue

// TakeFront removes up to limit elements (limit <= 0: none) from the front
// of *q and returns them, oldest first, in a slice with no room to append
// into *q; an emptied queue is set to nil, freeing its array. The caller
// holds the lock that guards *q.
func TakeFront[T any](q *[]T, limit int) []T {
	n := max(min(len(*q), limit), 0)
	batch := (*q)[:n:n]
	*q = (*q)[n:]
	if len(*q) == 0 {
		*q = nil
	}
	return batch
}

// PutLatest puts v on c, a channel of capacity 1 that holds only the
// latest value, replacing what c holds. The caller must be c's only
// sender; otherwise the send may block.
func PutLatest[T any](c chan T, v T) {
	select {
	case <-c:
	default:
	}
	c <- v
}
