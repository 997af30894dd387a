package gossip

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"

	"github.com/meshperf/meshperf/internal/testspec"
)

// metaLeaving is the node metadata of a member about to leave. memberlist
// tells an event delegate that a member is gone without saying whether it
// left or was declared dead (the Node it passes keeps its old state), so a
// member announces its leave in its metadata first.
const metaLeaving = "leaving"

// events is memberlist's EventDelegate: it keeps the last state of every
// member it heard of and signals changes. memberlist calls it with its
// own locks held, one call at a time: it never blocks and never calls back
// into memberlist.
type events struct {
	log     *slog.Logger
	changed chan struct{} // 1-buffered: a pending signal

	mu      sync.Mutex
	members map[string]Member
	leaving map[string]bool // members that announced their leave
}

var _ memberlist.EventDelegate = (*events)(nil)

func newEvents(log *slog.Logger) *events {
	return &events{log: log, changed: make(chan struct{}, 1), members: map[string]Member{}, leaving: map[string]bool{}}
}

// NotifyJoin records a member that joined (or came back) as alive.
func (e *events) NotifyJoin(n *memberlist.Node) { e.set(n, StateAlive) }

// NotifyLeave records a member gone: left if it announced it, else dead.
func (e *events) NotifyLeave(n *memberlist.Node) { e.set(n, StateDead) }

// NotifyUpdate records a member whose address or metadata changed: it is
// alive, and may be announcing its leave.
func (e *events) NotifyUpdate(n *memberlist.Node) { e.set(n, StateAlive) }

func (e *events) set(n *memberlist.Node, s State) {
	ip, _ := netip.AddrFromSlice(n.Addr)
	m := Member{Name: n.Name, Addr: netip.AddrPortFrom(ip.Unmap(), n.Port), State: s}
	e.mu.Lock()
	if s == StateAlive {
		e.leaving[m.Name] = string(n.Meta) == metaLeaving
	} else if e.leaving[m.Name] {
		m.State = StateLeft
	}
	old, seen := e.members[m.Name]
	e.members[m.Name] = m
	e.mu.Unlock()
	if seen && old == m {
		return
	}
	e.log.Info("gossip member", "member", m.Name, "addr", m.Addr, "state", testspec.GossipStateName(m.State))
	select {
	case e.changed <- struct{}{}:
	default: // a signal is pending already
	}
}

// snapshot returns the members sorted by name.
func (e *events) snapshot() []Member {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.SortedFunc(maps.Values(e.members), func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
}

// delegate is memberlist's Delegate: it only serves this member's
// metadata, empty or metaLeaving. It carries no messages and no state.
type delegate struct {
	leaving atomic.Bool
}

var _ memberlist.Delegate = (*delegate)(nil)

// NodeMeta returns metaLeaving once Close began, else nothing.
func (d *delegate) NodeMeta(limit int) []byte {
	if d.leaving.Load() && len(metaLeaving) <= limit {
		return []byte(metaLeaving)
	}
	return nil
}

// NotifyMsg ignores user messages: none are sent.
func (d *delegate) NotifyMsg([]byte) {}

// GetBroadcasts has no user broadcasts.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState has no user state for push/pull.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState ignores the remote user state: there is none.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// logWriter is the io.Writer under memberlist's log.Logger: each line,
// "[LEVEL] memberlist: text", becomes one slog record at that level.
type logWriter struct {
	log *slog.Logger
}

func (w *logWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		level, msg := parseLogLine(string(bytes.TrimRight(line, "\r\n")))
		if isRefusal(msg) {
			level = slog.LevelDebug // admission logs refusals, at most once a second
		}
		if msg != "" {
			// memberlist's logger carries no context: this adapter is the
			// top of its own call stack.
			w.log.Log(context.Background(), level, msg, "component", "memberlist")
		}
	}
	return len(p), nil
}

// parseLogLine splits one memberlist log line into a slog level and its
// text; lines without a level are info.
func parseLogLine(line string) (slog.Level, string) {
	level := slog.LevelInfo
	if rest, ok := strings.CutPrefix(line, "["); ok {
		if tag, text, ok := strings.Cut(rest, "]"); ok {
			switch tag {
			case "DEBUG", "TRACE":
				level = slog.LevelDebug
			case "WARN":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			line = strings.TrimSpace(text)
		}
	}
	return level, strings.TrimSpace(strings.TrimPrefix(line, "memberlist:"))
}
