// Package syncio holds writers that several goroutines may use at once: a
// Writer that serializes the writes to another writer (a command's stderr
// shared by a progress bar and a signal handler), and a Buffer that
// collects what they write (a log sink a test reads while its goroutines
// still log). Production code and test support both import it.
package syncio

import (
	"bytes"
	"io"
	"sync"
)

// Writer serializes the writes to the writer it wraps: one Write at a
// time, each passed through whole. Create it with NewWriter; it must not
// be copied after first use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer that serializes the writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p to the wrapped writer under the lock and returns what it
// returns.
func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Unwrap returns the wrapped writer (to ask whether it is a terminal, say).
// Writing to it directly bypasses the lock.
func (l *Writer) Unwrap() io.Writer { return l.w }

// Buffer is a bytes.Buffer that one or more writers and a reader may use
// at once. The zero value is an empty buffer ready for use; it must not be
// copied after first use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it always returns len(p) and a nil error.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns a copy of everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
