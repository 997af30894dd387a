package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/meshperf/meshperf/internal/protocol"
)

// namePrefix starts the name of every Service and EndpointSlice the
// coordinator manages.
const namePrefix = "meshperf-ep-"

// maxNameLength is the longest Service name: a DNS-1035 label.
const maxNameLength = 63

// hashLength is how many hex digits of the node name's SHA-256 end a name
// that had to be shortened or rewritten.
const hashLength = 10

// Name returns the name of the Service and EndpointSlice of node:
// "meshperf-ep-" and the node name when that is a valid DNS-1035 label of
// at most 63 characters. Otherwise (a long node name, or one with dots or
// upper-case letters) the node name is lower-cased, every character other
// than a-z, 0-9 and '-' becomes '-', it is cut to fit, and a hash of the
// original node name is appended, so that two node names never share a
// Service.
func Name(node string) string {
	plain := namePrefix + node
	if len(plain) <= maxNameLength && protocol.ValidateLabel(node) == nil {
		return plain
	}
	sum := sha256.Sum256([]byte(node))
	suffix := "-" + hex.EncodeToString(sum[:])[:hashLength]
	var b strings.Builder
	for _, c := range strings.ToLower(node) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	body := b.String()
	if room := maxNameLength - len(namePrefix) - len(suffix); len(body) > room {
		body = body[:room]
	}
	body = strings.Trim(body, "-")
	if body == "" {
		return namePrefix + suffix[1:]
	}
	return namePrefix + body + suffix
}

// nodeLabelValue is the value of the meshperf.io/node label for node: the
// node name when it is a valid label value (at most 63 characters), else
// the object name's part after the prefix.
func nodeLabelValue(node string) string {
	if len(node) <= maxNameLength && isLabelValue(node) {
		return node
	}
	return strings.TrimPrefix(Name(node), namePrefix)
}

// isLabelValue reports whether s is a non-empty label value: alphanumerics,
// '-', '_' and '.', beginning and ending with an alphanumeric.
func isLabelValue(s string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}
