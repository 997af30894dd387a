package runs

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the helpers most of the package's tests share: a real
// store in the test's temporary directory, the Config.IsNotFound that
// goes with it, and an Observer that reports each run's end.

// openStore opens a store in a new temporary directory of tb; it is
// closed when tb ends (after the test's deferred calls, a Manager's Close
// among them).
func openStore(tb testing.TB) *store.Store {
	tb.Helper()
	st, err := store.Open(store.Config{Path: filepath.Join(tb.TempDir(), "db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// storeNotFound is Config.IsNotFound for coordinator/store.
func storeNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// endObserver sends each run's final state.
type endObserver chan measurev1.RunState

func (o endObserver) RunStarted(string)                           {}
func (o endObserver) Recorded([]*measurev1.Result)                {}
func (o endObserver) RunEnded(_ string, state measurev1.RunState) { o <- state }
