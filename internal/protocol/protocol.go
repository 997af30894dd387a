// Package protocol holds what both ends of the agent<->coordinator stream
// must agree on beyond the generated types: the protocol version and the
// rules for node names.
package protocol

import "fmt"

// Version is the version of proto/meshperf/agent/v1 both sides speak; the
// coordinator refuses an agent that announces another one.
const Version = 1

// ValidateNodeName checks a Kubernetes node name: a DNS-1123 subdomain of
// 1..253 characters (lower-case alphanumerics, '-' and '.', starting and
// ending with an alphanumeric). The error names the value.
func ValidateNodeName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("node name %q must be 1..253 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '-' && c != '.' || (i == 0 || i == len(name)-1) && !alnum {
			return fmt.Errorf("node name %q is not a DNS-1123 subdomain (lower-case alphanumerics, '-', '.')", name)
		}
	}
	return nil
}
