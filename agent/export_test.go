package agent

import "time"

// SetRegisterTimeout shortens how long a session waits for the answer to
// its Register, for a test; the returned function restores the default.
// Call it before the agent starts and restore after Run returned.
func SetRegisterTimeout(d time.Duration) (restore func()) {
	old := registerTimeout
	registerTimeout = d
	return func() { registerTimeout = old }
}

// SetBackoffObserver makes the agent call f with its backoff (before
// jitter) each time it is about to wait to reconnect; the returned function
// removes f. Call it before the agent starts and restore after Run
// returned.
func SetBackoffObserver(f func(backoff time.Duration)) (restore func()) {
	old := observeBackoff
	observeBackoff = f
	return func() { observeBackoff = old }
}
