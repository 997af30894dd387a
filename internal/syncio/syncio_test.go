package syncio

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: writers sharing a Buffer, or a Writer around a
// plain bytes.Buffer, lose no byte and interleave no write (run with -race
// to see a data race if the lock were missing).
func TestConcurrentWrites(t *testing.T) {
	for _, tt := range []struct {
		name    string
		writers int
		// sink returns the shared writer and a func that reads what it got.
		sink func() (io.Writer, func() string)
	}{
		{"Buffer, one writer", 1, func() (io.Writer, func() string) { var b Buffer; return &b, b.String }},
		{"Buffer, eight writers", 8, func() (io.Writer, func() string) { var b Buffer; return &b, b.String }},
		{"Writer, eight writers", 8, func() (io.Writer, func() string) {
			var b bytes.Buffer
			return NewWriter(&b), b.String
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const line = "line of a log\n"
			w, read := tt.sink()
			var wg sync.WaitGroup
			for range tt.writers {
				wg.Go(func() {
					for range 100 {
						if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
							t.Errorf("Write = %d, %v", n, err)
						}
					}
				})
			}
			wg.Wait()
			if got, want := read(), strings.Repeat(line, 100*tt.writers); got != want {
				t.Errorf("read %d bytes, want %d", len(got), len(want))
			}
		})
	}
}

// TestUnwrap: Unwrap returns the writer NewWriter was given.
func TestUnwrap(t *testing.T) {
	var b bytes.Buffer
	if got := NewWriter(&b).Unwrap(); got != &b {
		t.Errorf("Unwrap() = %v, want the wrapped buffer", got)
	}
}
