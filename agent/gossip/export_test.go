package gossip

// Kill stops g without leaving the pool, as a crash would.
func (g *Gossip) Kill() { g.kill() }

// ParseLogLine exposes parseLogLine.
var ParseLogLine = parseLogLine
