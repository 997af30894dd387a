// Package version holds meshperf's build version, set at link time with
// -ldflags "-X github.com/meshperf/meshperf/internal/version.Version=v1.2.3".
package version

// Version is the build version of the agent and the coordinator; "dev" when
// not set at link time.
var Version = "dev"
