package testutil

import (
	"strings"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// ProtoText is m's prototext on one line, for comparing a message with a
// literal in a table test: runs of white space collapse to one space and
// "name: value" becomes "name:value" (`tests:{test:TEST_PING} label:"x"`).
// prototext varies its white space on purpose (so that no one depends on
// its exact bytes); this removes that. Fields are in the message's order.
// A string value's own white space is folded the same way, so compare
// values with runs of spaces or ": " in them field by field instead.
func ProtoText(m proto.Message) string {
	s := strings.Join(strings.Fields(prototext.MarshalOptions{}.Format(m)), " ")
	return strings.ReplaceAll(s, ": ", ":")
}
