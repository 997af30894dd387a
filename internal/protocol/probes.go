package protocol

import "time"

// Bounds of the continuous probes (agentv1.ProbeSettings and
// agentv1.ProbePlan). The coordinator's config refuses a probes section
// outside them and an agent refuses a plan outside them, so that a
// config the coordinator accepts is a plan every agent runs.
const (
	// ProbeMinInterval and ProbeMaxInterval bound ProbeSettings.interval.
	ProbeMinInterval = time.Second
	ProbeMaxInterval = time.Hour
	// ProbeMaxReportInterval bounds ProbeSettings.report_interval and
	// subset_rotation.
	ProbeMaxReportInterval = 24 * time.Hour
	// ProbeMinTimeout is the shortest ProbeSettings.timeout; the longest
	// is just under the interval.
	ProbeMinTimeout = time.Millisecond
	// ProbeMaxPayloadBytes is the largest ProbeSettings.payload_bytes.
	ProbeMaxPayloadBytes = 65000
	// ProbeMaxInFlight is the largest ProbeSettings.max_in_flight.
	ProbeMaxInFlight = 4096
	// ProbeMaxPacketsPerSecond is the largest
	// ProbeSettings.max_packets_per_second.
	ProbeMaxPacketsPerSecond = 100000
	// ProbeMaxPeers is the most peers a plan holds, and the largest
	// ProbeSettings.subset_size.
	ProbeMaxPeers = 10000
	// MinMTUBytes and MaxMTUBytes bound a known MTU of an address or a
	// probe peer (0 is unknown): IPv4's minimum reassembly size, and the
	// largest IP packet.
	MinMTUBytes = 576
	MaxMTUBytes = 65535
)
