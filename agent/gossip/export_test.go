package gossip

import "time"

// Kill stops g without leaving the pool, as a crash would.
func (g *Gossip) Kill() { g.kill() }

// ParseLogLine exposes parseLogLine.
var ParseLogLine = parseLogLine

// SetGossipToTheDead shortens memberlist's gossip to dead members for the
// Gossips created until the returned function restores the default.
func SetGossipToTheDead(d time.Duration) (restore func()) {
	old := gossipToTheDead
	gossipToTheDead = d
	return func() { gossipToTheDead = old }
}
