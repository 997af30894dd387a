// Package config owns the coordinator's config file (`coordinator serve
// --config FILE`): its types, its parsing, its validation and defaults, the
// RunSpec builder that both its monitor section and `coordinator trigger`'s
// flags go through, and its reference (docs/config.md, rendered by
// Reference from this package's source; `make config-docs`). Its errors
// wrap ErrConfig.
//
// The coordinator reads the file once, at start (`coordinator serve
// --config FILE`; no file: on-demand runs only, no external target). It is
// YAML (or JSON). Unknown and repeated keys are refused, and so is a value
// of the wrong YAML type (`name: yes` is a boolean; quote it); an error
// names the key and the value. An example:
//
//	external:                 # targets outside the mesh that runs may name
//	  - name: ingress         # a DNS-1123 label; results carry it as dst_node
//	    address: 203.0.113.10 # an IP or a DNS name (each agent resolves it)
//	    http_url: http://203.0.113.10/healthz # optional: the HTTP test
//	    iperf3_port: 5201     # optional: an iperf3 server behind it
//	    qperf_port: 19765     # optional, with qperf_data_port: a qperf
//	    qperf_data_port: 19766 #  server (qperf -lp 19765) behind it
//	  - name: other-cluster
//	    address: node-1.other.example.com     # ping only
//	node_cidrs: [10.0.0.0/16]   # host IPs the agents may register (none: any)
//	pod_cidrs: [10.244.0.0/16]  # pod IPs (none: any)
//	service_cidrs: [10.96.0.0/12] # service IPs (none: any)
//	probes:                   # the agents' continuous in-process mesh
//	  interval: 10s           # each peer, path and kind once per interval
//	  report_interval: 60s    # one report per agent per minute
//	  kinds: [icmp, icmp_mtu, tcp, http]
//	  paths: [host-host, pod-pod]
//	  ip_families: [ipv4, ipv6] # default [ipv4]
//	monitor:
//	  light:                  # every 30 s, each tick moved by up to +-5 s
//	    interval: 30s
//	    jitter: 5s
//	    tests: [ping, qperf_tcp_lat]
//	    paths: [host-host, pod-pod, pod-service, host-external, pod-external]
//	    external_targets: [ingress, other-cluster]
//	    duration: 1s          # qperf/iperf3 measuring time
//	  bandwidth:              # a bandwidth mesh every 6 h
//	    interval: 6h
//	    tests: [iperf3_tcp, qperf_tcp_bw]
//	    paths: [host-host, pod-pod]
//	    sweep: true           # qperf message sizes 64 B .. 64 KiB
//
// Each schedule of the monitor section runs over the default mesh (nodes
// in maintenance left out); coordinator/monitor ticks them. A tick that
// finds a run in progress is skipped, so on-demand runs go first.
package config
