package gossip

import (
	"log/slog"
	"net/netip"

	"github.com/hashicorp/memberlist"
)

// Kill stops g without leaving the pool, as a crash would.
func (g *Gossip) Kill() { g.kill() }

// ParseLogLine exposes parseLogLine.
var ParseLogLine = parseLogLine

// Admit runs the admission of a member named self, whose own address is
// loopback or not, holding registered (nil: none yet), on a member name
// at addr.
func Admit(self string, loopback bool, registered map[string]netip.AddrPort, name string, addr netip.AddrPort) error {
	a := &admission{self: self, loopback: loopback, log: slog.New(slog.DiscardHandler)}
	if registered != nil {
		a.setRegistered(registered)
	}
	return a.NotifyAlive(&memberlist.Node{Name: name, Addr: addr.Addr().AsSlice(), Port: addr.Port()})
}
