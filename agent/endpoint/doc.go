// Package endpoint is the handshake between a node's agent and its pod
// endpoint. The endpoint pod runs `agent endpoint` (Dial), a tiny process
// that connects to a unix socket in a hostPath directory, sends one hello
// line and then holds the connection open, reconnecting with backoff when
// the agent goes away. The agent's side (Server) learns the peer's PID from
// the socket's credentials (SO_PEERCRED), pins the process with a pidfd,
// opens its network namespace and finds its IPv4 address there: that is the
// node's pod endpoint until the connection closes, and the newest valid
// connection wins. Nothing about the pod is configured by hand.
//
// The wire protocol is one JSON line each way: the endpoint sends a Hello,
// the agent answers a Reply (accepted, with the pod IP it found, or refused
// with the reason) and, if it accepted, later closes the connection only
// when a newer endpoint replaces this one ("replaced") or it shuts down.
package endpoint
