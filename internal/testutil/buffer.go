package testutil

import "github.com/meshperf/meshperf/internal/syncio"

// SyncBuffer is a bytes.Buffer that one or more writers (a slog handler
// fed by goroutines under test) and a reader (the test) may use at once:
// syncio.Buffer, which production code may import too. The zero value is
// an empty buffer ready for use; it must not be copied after first use.
type SyncBuffer = syncio.Buffer
