// Package probe is the agent's in-process continuous prober: it holds the
// coordinator's versioned ProbePlan (validated field by field: nothing the
// coordinator sends is believed unchecked), schedules every (peer, path,
// kind) probe at its own stable phase within the plan's interval, runs the
// probes (ICMP echo, ICMP echo filling the path MTU with don't-fragment
// set, a one-byte TCP echo and an HTTP GET) from the agent's own process on
// the host network or inside the pod network's namespace, and sums the
// results up into one ProbeReport per report period. It probes in each
// family of the plan's ip_families (none: IPv4 only): the IPv6 probes go to
// the peers' *_ipv6 addresses over ICMPv6 (icmp6.go), from the networks
// that have an IPv6 address (Network.IPv6), and their series and
// summaries carry the family.
//
// It owns: the plan it holds (Apply), one scheduler goroutine, which
// sleeps on a timerfd (alarm.go), sends every ICMP echo, starts every TCP
// probe and times both out, one goroutine that sees the TCP probes
// through (tcpprobe.go), the HTTP probe goroutines it starts (probes in
// flight are bounded by max_in_flight), one raw ICMP socket pair and one
// reader goroutine per network (and an ICMPv6 pair and reader per network
// with an IPv6 address), a stock of TCP sockets per namespaced
// network (nssock.go), and the period accounting. Every ICMP probe
// starts at its own due time, first in its wakeup (started in a burst,
// echoes read less than ping's: see deploy/lab's TestProbeFidelity); the
// TCP and HTTP probes due within startSlack join the wakeup; finished
// probes wait for the loop's next wakeup unless they failed or
// end a period. It does
// not own the stream to the coordinator, the report spool or the sequence
// counter: the caller passes Config.Report and Config.NextSeq. The TCP echo
// responder that peers probe is ServeEcho; the caller runs it on each
// network's probe_port.
//
// Every goroutine it starts ends with the context given to Run (or to
// ServeEcho), and Run returns only once they have.
package probe
