package testutil

import (
	"strings"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// ProtoText is m's prototext on one line, for comparing a message with a
// literal in a table test: runs of white space collapse to one space and
// "name: value" becomes "name:value" (`tests:TEST_PING paths:PATH_HOST_TO_HOST`).
// prototext varies its white space on purpose (so that no one depends on
// its exact bytes); this removes that. Fields are in the message's order.
func ProtoText(m proto.Message) string {
	s := strings.Join(strings.Fields(prototext.MarshalOptions{}.Format(m)), " ")
	return strings.ReplaceAll(s, ": ", ":")
}
