package runs

import "fmt"

// Defaults of the manager's bounds.
const (
	// DefaultMaxActiveRuns is Config.MaxActiveRuns' default: a few runs
	// at once (each run spreads its tests over the mesh already).
	DefaultMaxActiveRuns = 4
	// DefaultMaxWatchers is Config.MaxWatchers' default.
	DefaultMaxWatchers = 64
)

// reserveRun takes one of Config.MaxActiveRuns' places for a Trigger,
// counting the runs in progress and those being planned; release gives
// it back once the run is active (which then holds its place until it
// ends) or refused. The error wraps ErrTooBusy.
func (m *Manager) reserveRun() (release func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.active) + m.planning; n >= m.cfg.MaxActiveRuns {
		m.log.Warn("run refused: too many runs in progress", "runs", n, "max_active_runs", m.cfg.MaxActiveRuns)
		return nil, fmt.Errorf("%w: %d runs are in progress, at most %d (--max-active-runs); wait for one to end", ErrTooBusy, n, m.cfg.MaxActiveRuns)
	}
	m.planning++
	return func() {
		m.mu.Lock()
		m.planning--
		m.mu.Unlock()
	}, nil
}
