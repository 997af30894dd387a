package cli

import (
	"time"

	"github.com/meshperf/meshperf/coordinator/config"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// triggerFlags are `coordinator trigger`'s own flags.
type triggerFlags struct {
	tests, paths, pairs []string
	external            []string
	repeats             uint32
	meshRounds          uint32
	firstMeshRound      uint32
	duration            time.Duration
	pingCount           uint32
	msgSizes            []string
	sweep               bool
	streams, blockSizes []string
	maxHeavy            uint32
	// http_load's parameters (0 or false: the defaults).
	loadRequests, loadConcurrency uint32
	keepAlive                     bool
	loadTimeout                   time.Duration
	label                         string
	ipFamily                      string
	noWait                        bool
	onInterrupt                   string // --on-interrupt; empty: see interruptPolicy
}

// triggerFlagNames name the RunSpec builder's fields by trigger's flags.
var triggerFlagNames = config.Names{Key: map[config.Field]string{
	config.FieldTests: "--tests", config.FieldPaths: "--paths", config.FieldPairs: "--pair",
	config.FieldIPFamily: "--ip-family", config.FieldDuration: "--duration", config.FieldPingCount: "--ping-count",
	config.FieldMsgSizes: "--msg-sizes", config.FieldSweep: "--sweep", config.FieldStreams: "--streams",
	config.FieldBlockSizes: "--block-sizes", config.FieldRequests: "--requests", config.FieldConcurrency: "--concurrency",
	config.FieldKeepAlive: "--keep-alive", config.FieldLoadTimeout: "--load-timeout", config.FieldFirstMeshRound: "--first-mesh-round",
}}

// spec turns the flags into a RunSpec with the builder the config file's
// schedules use too (config.BuildRunSpec), strictly: a parameter flag that
// no chosen test uses is refused, so that nothing is silently ignored. The
// coordinator checks what needs the mesh.
func (tf *triggerFlags) spec() (*measurev1.RunSpec, error) {
	return config.BuildRunSpec(config.RunInput{
		Tests: splitList(tf.tests), Paths: splitList(tf.paths), Pairs: tf.pairs, ExternalTargets: splitList(tf.external),
		Repeats: tf.repeats, MeshRounds: tf.meshRounds, FirstMeshRound: tf.firstMeshRound, MaxConcurrentHeavy: tf.maxHeavy, Label: tf.label, IPFamily: tf.ipFamily,
		Duration: tf.duration, PingCount: tf.pingCount, MsgSizes: splitList(tf.msgSizes), Sweep: tf.sweep,
		Streams: splitList(tf.streams), BlockSizes: splitList(tf.blockSizes),
		LoadRequests: tf.loadRequests, LoadConcurrency: tf.loadConcurrency, KeepAlive: tf.keepAlive, LoadTimeout: tf.loadTimeout,
		Strict: true,
	}, triggerFlagNames)
}
