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

// SetServerLinger sets how long test servers may linger after a session's
// end (servers.Config.LingerMax) and may go without a connection while
// they linger (LingerIdle), for a test; zero means the default. The
// returned function restores the defaults. Call it before the agent starts
// and restore after Run returned.
func SetServerLinger(maxLinger, idle time.Duration) (restore func()) {
	oldMax, oldIdle := lingerMax, lingerIdle
	lingerMax, lingerIdle = maxLinger, idle
	return func() { lingerMax, lingerIdle = oldMax, oldIdle }
}
