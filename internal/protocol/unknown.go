package protocol

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ClearUnknown drops the unknown fields of m and of every message in it,
// in place: bytes that no field of the schema names, which a client or an
// agent may send at up to a message's size, are never stored, copied into
// planned tests or sent on. A nil m is left alone.
func ClearUnknown(m proto.Message) {
	if m != nil {
		clearUnknown(m.ProtoReflect())
	}
}

func clearUnknown(m protoreflect.Message) {
	if len(m.GetUnknown()) > 0 {
		m.SetUnknown(nil)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					clearUnknown(mv.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for l, i := v.List(), 0; i < l.Len(); i++ {
					clearUnknown(l.Get(i).Message())
				}
			}
		case fd.Message() != nil:
			clearUnknown(v.Message())
		}
		return true
	})
}
