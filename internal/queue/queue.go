// Package queue owns the one way meshperf takes work off an in-memory
// slice queue guarded by its owner's lock: a batch from the front, the
// emptied queue's array freed.
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
