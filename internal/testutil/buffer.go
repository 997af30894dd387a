package testutil

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that one or more writers (a slog handler
// fed by goroutines under test) and a reader (the test) may use at once.
// The zero value is an empty buffer ready for use; it must not be copied
// after first use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it always returns len(p) and a nil error.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns a copy of everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
