package labtest

import (
	"fmt"
	"time"
)

// LightMeshConfig is a lab coordinator's config file (coordinator/config)
// for the tests that watch a mesh go by: a light continuous mesh of ping
// and a 1 s qperf tcp_lat over host-host and pod-pod every 10 s (jitter
// 1 s), repeats samples per test (0: the defaults), and the agents' ICMP
// and TCP probes every probeInterval over the same paths, reported every
// 2 s. probeInterval is printed as a Go duration (e.g. 1s).
func LightMeshConfig(repeats uint32, probeInterval time.Duration) string {
	return fmt.Sprintf(`monitor:
  light:
    interval: 10s
    jitter: 1s
    tests: [ping, qperf_tcp_lat]
    paths: [host-host, pod-pod]
    duration: 1s
    repeats: %d
probes:
  interval: %s
  report_interval: 2s
  kinds: [icmp, tcp]
  paths: [host-host, pod-pod]
`, repeats, probeInterval)
}
