// Package remotewrite owns sending meshperf's per-pair and per-node series
// to a Prometheus remote-write receiver (Prometheus, Mimir, Thanos,
// VictoriaMetrics): the bounded in-memory queue, the batching, the one
// sender with its retries, and the remote-write metrics of its own.
//
// Protocol: remote write 1.0 (a prometheus.WriteRequest protobuf,
// snappy-compressed, POSTed with Content-Encoding: snappy, Content-Type:
// application/x-protobuf, X-Prometheus-Remote-Write-Version: 0.1.0),
// through github.com/prometheus/client_golang/exp/api/remote; the message
// is encoded here (wire.go), it has four small types.
//
// What is sent, with the results' own timestamps (Writer implements
// runs.Observer; Writer.Reports takes the stored probe reports):
//
//	meshperf_pair_latency_seconds{src,dst,test,path}           a result's headline, lower is better
//	meshperf_pair_throughput_bps{src,dst,test,path}            a result's headline, higher is better
//	meshperf_node_latency_seconds{node,role,test,path}         at a run's end: median over the run's pair figures of the node as src or dst
//	meshperf_node_throughput_bps{node,role,test,path}          likewise
//	meshperf_pair_latency_seconds{src,dst,test,path,quantile}  a probe interval's RTT median (0.5) and p90 (0.9)
//	meshperf_pair_loss_ratio{src,dst,test,path}                a probe interval's loss, 0..1
//	meshperf_fault{node,kind}                                  1 per finding of a continuous run (Writer.SetFaults), 0 once it clears
//	meshperf_external_fault{target,kind}                       likewise, for a finding about an external target
//
// test is testspec.Name ("ping", "iperf3_tcp", ...) for results and
// "probe_" plus the probe kind ("probe_icmp", "probe_tcp", ...) for
// probes; path is testspec.PathName. A result's timestamp is its start
// time, a probe interval's its period start, a node figure's the newest
// start time of its run's results. On the external paths dst is the
// target's name and only the source node gets a node figure. Keeping a
// run's figures until it ends costs 16 to 32 bytes per result of the runs
// in progress (0.4 to 0.8 GB for one run over 25 M pairs); a result that
// comes after its run ended gets its pair sample only.
//
// The queue holds at most Config.QueueSamples samples of 32 bytes each
// (names are interned: the intern table is O(distinct node, test and path
// names), never O(pairs)), plus the one request in flight (at most
// Config.BatchSamples samples, encoded and compressed). When it is full the
// oldest queued samples are dropped and counted. One sender takes batches
// of at most BatchSamples, or what came within BatchWait, and retries a
// request on network errors, 5xx and 429 with exponential backoff with
// jitter (plus Retry-After) until it succeeds: order is kept per series,
// and an outage loses nothing until the queue overflows. Any other 4xx
// drops the request's samples (outcome "dropped", reason "rejected").
// On shutdown the queue is flushed for Config.FlushTimeout; what is left
// counts as outcome "failed" (samples queued after the flush emptied the
// queue are not sent, and not counted).
//
// Its metrics (Writer is a prometheus.Collector):
//
//	meshperf_remote_write_samples_total{outcome="sent|dropped|failed"}  counter
//	meshperf_remote_write_dropped_samples_total{reason="queue_full|rejected"} counter
//	meshperf_remote_write_queue_samples                                gauge: queued plus in flight
//	meshperf_remote_write_queue_capacity                               gauge: Config.QueueSamples
//	meshperf_remote_write_requests_total{code}                         counter: by HTTP status, "error" for no response
//	meshperf_remote_write_retries_total                                counter
//	meshperf_remote_write_last_success_timestamp_seconds               gauge: Unix time of the last 2xx
package remotewrite
