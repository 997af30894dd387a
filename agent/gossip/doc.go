// Package gossip owns an agent's membership in the memberlist pool of
// meshperf agents: it starts memberlist on the node's host IP (or on a
// transport a test passes in), joins the seeds the coordinator names,
// remembers every member it heard of with its last state (alive, suspect,
// dead or left; memberlist itself forgets the dead after a while), signals
// every change on a channel, and leaves the pool on Close. Member names are
// Kubernetes node names. With a key file (Config.KeyFile, ParseKeys) every
// memberlist message is encrypted with the keyring's primary key and only
// messages one of its keys decrypts are taken; the file is re-read while
// the agent runs, so keys rotate without a restart.
//
// memberlist's hooks go through small unexported adapters: events (an
// EventDelegate that never blocks), admission (an AliveDelegate and
// MergeDelegate that refuse members at loopback, link-local, unspecified,
// multicast or cloud metadata addresses, and, once Gossip.SetRegistered
// gave the registered nodes, members that are none of them or not at their
// gossip address) and logs (memberlist's log.Logger written into slog).
package gossip
