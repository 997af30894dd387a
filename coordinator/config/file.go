package config

// The types of this file are the config file as it is written: each field's
// json tag is its key, its doc comment its help in docs/config.md, and its
// type, default and unit tags fill that page's columns (Reference).

// File is the whole config file: the keys at its top level. Every section
// is optional.
type File struct {
	// External is the allowlist of external targets: the only ones a run
	// may name, sent to every agent; at most protocol.MaxExternalTargets
	// (256), names unique.
	External []External `json:"external" default:"none"`
	// Monitor holds the continuous schedules that coordinator/monitor
	// ticks.
	Monitor Monitor `json:"monitor" default:"none"`
	// Probes is the continuous in-process mesh of the agents; absent means
	// none.
	Probes *Probes `json:"probes" default:"none"`
	// NodeCIDRs are the prefixes (such as 10.0.0.0/16) the agents' host
	// IPs must be in (registry.AddressPolicy), at most 64; empty means any
	// address.
	NodeCIDRs []string `json:"node_cidrs" type:"list of CIDR prefixes" default:"any address"`
	// PodCIDRs are the prefixes the agents' pod IPs must be in, at most
	// 64; empty means any address.
	PodCIDRs []string `json:"pod_cidrs" type:"list of CIDR prefixes" default:"any address"`
	// ServiceCIDRs are the prefixes the nodes' service IPs (ClusterIPs)
	// must be in, at most 64; empty means any address.
	ServiceCIDRs []string `json:"service_cidrs" type:"list of CIDR prefixes" default:"any address"`
}

// Monitor is the file's monitor section: the continuous schedules, each
// run over the default mesh.
type Monitor struct {
	// Light is the frequent latency mesh; absent means none. Its runs are
	// labelled monitor-light.
	Light *Schedule `json:"light" default:"none"`
	// Bandwidth is the rare bandwidth mesh; absent means none. Its runs
	// are labelled monitor-bandwidth.
	Bandwidth *Schedule `json:"bandwidth" default:"none"`
}

// External is one external target of the allowlist (see
// protocol.ValidateExternalTarget for the rules).
type External struct {
	// Name is a DNS-1123 label that runs name the target by; results carry
	// it as their dst_node, so it must not be a node's name. Required.
	Name string `json:"name" default:"required"`
	// Address is an IP address or a DNS name, which each agent resolves
	// itself; ping goes to it. Required.
	Address string `json:"address" default:"required"`
	// HTTPURL is what the HTTP test fetches: an http or https URL whose
	// host is Address; empty means ping only.
	HTTPURL string `json:"http_url" type:"URL" default:"none (ping only)"`
	// Iperf3Port is the TCP port of an iperf3 server (iperf3 -s -p PORT)
	// behind Address, e.g. a DaemonSet behind a LoadBalancer; 0 means
	// none, and no iperf3 test runs against the target. One client at a
	// time: runs serialize their iperf3 tests to the target.
	Iperf3Port uint32 `json:"iperf3_port" type:"port" default:"0 (none)"`
	// QperfPort is the listen port of a qperf server (qperf -lp PORT)
	// behind Address, and QperfDataPort the data port its clients pin
	// (-ip), which the LoadBalancer must forward too (TCP and UDP); both
	// or neither, 0 meaning none, and distinct from each other and from
	// Iperf3Port.
	QperfPort uint32 `json:"qperf_port" type:"port" default:"0 (none)"`
	// QperfDataPort is the data port of the qperf server at QperfPort
	// (see there).
	QperfDataPort uint32 `json:"qperf_data_port" type:"port" default:"0 (none)"`
}

// Schedule is one continuous mesh of the monitor section.
type Schedule struct {
	// Interval between runs, e.g. "30s" or "6h"; at least 5 s. Required.
	Interval string `json:"interval" type:"duration" default:"required"`
	// Jitter moves each tick by a random amount in [-Jitter, +Jitter] so
	// agents do not fire in step; less than half of Interval.
	Jitter string `json:"jitter" type:"duration" default:"interval / 6"`
	// Tests are test names (coordinator trigger --tests); at least one.
	Tests []string `json:"tests" type:"list of test names" default:"required"`
	// Paths are path names (coordinator trigger --paths); empty means the
	// default paths.
	Paths []string `json:"paths" type:"list of path names" default:"host-host, host-pod, pod-pod, pod-service"`
	// Duration is the qperf and iperf3 measuring time, whole seconds.
	Duration string `json:"duration" type:"duration" default:"2s"`
	// Sweep runs qperf from 64 B to 64 KiB, doubling.
	Sweep bool `json:"sweep" default:"false"`
	// Repeats is the number of samples per test; 0 means the defaults (3
	// for ping, 5 for http, 1 for qperf and iperf3).
	Repeats uint32 `json:"repeats" unit:"samples" default:"0 (per test)"`
	// MeshRounds, if not 0, makes each run measure that many rounds of
	// the full mesh, the next run the next ones, so that the runs cover
	// every ordered pair in turn, within ceil(2(n-1)/MeshRounds) runs of
	// n nodes. In a round every node is in one pair, so a run measures
	// every node MeshRounds times and takes MeshRounds rounds of heavy
	// tests whatever the number of nodes; a run takes fewer rounds where
	// they hold more than 100,000 tests. 0 means the full mesh, n(n-1)
	// pairs, which a run holds only while they are at most 100,000 tests
	// (112 nodes for 2 tests on 4 paths). At least 4 (fault localisation
	// compares each node's pairs), at most 10000.
	MeshRounds uint32 `json:"mesh_rounds" unit:"rounds" default:"0 (full mesh)"`
	// ExternalTargets names targets of the external list to measure from
	// every node; with Paths, those must include host-external or
	// pod-external; without, both external paths run besides the default
	// ones.
	ExternalTargets []string `json:"external_targets" type:"list of names" default:"none"`
}

// Probes is the file's probes section: the continuous mesh that every
// agent probes on its own clock, in-process, and reports in batches
// (agent/probe).
type Probes struct {
	// Interval is how often each peer, path and kind is probed; 1s to 1h.
	Interval string `json:"interval" type:"duration" default:"10s"`
	// ReportInterval is the period of one agent report: a whole multiple
	// of Interval, at most 24h (a new failure is reported within one
	// Interval).
	ReportInterval string `json:"report_interval" type:"duration" default:"interval"`
	// Timeout bounds one probe; at least 1ms, and under Interval.
	Timeout string `json:"timeout" type:"duration" default:"min(2s, interval / 2)"`
	// Kinds are icmp, icmp_mtu, tcp and http; empty means all four.
	Kinds []string `json:"kinds" type:"list of probe kinds" default:"icmp, icmp_mtu, tcp, http"`
	// Paths are host-host, host-pod, pod-pod, host-service and
	// pod-service; empty means host-host and pod-pod.
	Paths []string `json:"paths" type:"list of path names" default:"host-host, pod-pod"`
	// PayloadBytes is the icmp probe's payload (ping's 56 by default); at
	// most 65000.
	PayloadBytes uint32 `json:"payload_bytes" unit:"bytes" default:"56"`
	// MaxInFlight bounds each agent's outstanding probes; at most 4096.
	MaxInFlight uint32 `json:"max_in_flight" unit:"probes" default:"256"`
	// MaxPacketsPerSecond bounds the probes each agent starts per second;
	// at most 100000.
	MaxPacketsPerSecond uint32 `json:"max_packets_per_second" unit:"probes/s" default:"2000"`
	// SubsetSize, if not 0, makes each agent probe only that many peers
	// per interval, picked by rendezvous hashing and rotated every
	// SubsetRotation, so that every pair is covered within
	// ceil(peers/SubsetSize) rotations; 0 means the full mesh. At most
	// 10000.
	SubsetSize uint32 `json:"subset_size" unit:"peers" default:"0 (full mesh)"`
	// SubsetRotation is how long one subset is kept: at least Interval,
	// at most 24h, and only with SubsetSize.
	SubsetRotation string `json:"subset_rotation" type:"duration" default:"10 x interval"`
	// IPFamilies are the families probed, ipv4 and ipv6. Each peer is
	// probed in each listed family it has an address of (on the path's
	// network), from agents with an address of it. [ipv4] alone sends no
	// ip_families to the agents (IPv4 only, as before families existed).
	IPFamilies []string `json:"ip_families" type:"list of ipv4, ipv6" default:"ipv4"`
}
