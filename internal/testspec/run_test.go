package testspec

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestRunHeaderFields decides every field of measurev1.Run: a field added
// to the message fails this test until it is listed here as part of the
// header (and RunHeader copies it) or as left out of it.
func TestRunHeaderFields(t *testing.T) {
	inHeader := map[protoreflect.Name]bool{
		"run_id": true, "spec": true, "state": true, "message": true, "create_time": true, "end_time": true,
		"tests_done": true, "tests_failed": true, "tests_planned": true, "rounds": true,
		"origin":  true,  // whose run it is: the alerter and the web read it from headers
		"planned": false, // the bulk of a run: stored apart, left out of progress updates
		// which rounds of the mesh: the monitor's next run starts after them
		"mesh_rounds": true, "mesh_round_count": true,
	}
	run := &measurev1.Run{}
	fields := run.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if _, ok := inHeader[fd.Name()]; !ok {
			t.Errorf("measurev1.Run field %q is neither in the header nor left out of it: decide in RunHeader and in this test", fd.Name())
			continue
		}
		run.ProtoReflect().Set(fd, someValue(run.ProtoReflect(), fd))
	}
	for name := range inHeader {
		if fields.ByName(name) == nil {
			t.Errorf("field %q listed here is not in measurev1.Run", name)
		}
	}
	h := RunHeader(run).ProtoReflect()
	for i := range fields.Len() {
		fd := fields.Get(i)
		want, listed := inHeader[fd.Name()]
		if !listed {
			continue
		}
		switch got := h.Has(fd); {
		case got != want:
			t.Errorf("RunHeader: field %q set %t, want %t", fd.Name(), got, want)
		case want && !h.Get(fd).Equal(run.ProtoReflect().Get(fd)):
			t.Errorf("RunHeader: field %q = %v, want %v", fd.Name(), h.Get(fd), run.ProtoReflect().Get(fd))
		}
	}
	if RunHeader(nil) != nil {
		t.Error("RunHeader(nil) is not nil")
	}
}

// someValue is a value of fd, set (non-zero) whatever its kind.
func someValue(m protoreflect.Message, fd protoreflect.FieldDescriptor) protoreflect.Value {
	if fd.IsList() {
		l := m.NewField(fd).List()
		elem := l.NewElement()
		if fd.Kind() != protoreflect.MessageKind {
			elem = scalar(fd)
		}
		l.Append(elem)
		return protoreflect.ValueOfList(l)
	}
	if fd.Kind() == protoreflect.MessageKind {
		return m.NewField(fd) // an empty message, set
	}
	return scalar(fd)
}

// scalar is a non-zero value of a scalar field's kind.
func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(7)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(7)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	}
	panic("unhandled kind " + fd.Kind().String())
}

// RunHeader leaves the run it copies unchanged.
func TestRunHeaderKeepsRun(t *testing.T) {
	run := &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_RUNNING, TestsPlanned: 1,
		Planned: []*measurev1.PlannedTest{{TestId: "t00001"}}}
	want := proto.CloneOf(run)
	h := RunHeader(run)
	h.State = measurev1.RunState_RUN_STATE_SUCCEEDED
	if !proto.Equal(run, want) {
		t.Errorf("run after RunHeader = %v, want %v", run, want)
	}
}

func TestIsContinuous(t *testing.T) {
	for label, want := range map[string]bool{"monitor-light": true, "monitor-bandwidth": true, "monitor-": true,
		"monitored": false, "Monitor-light": false, "": false, "vxlan": false} {
		if got := IsContinuous(label); got != want {
			t.Errorf("IsContinuous(%q) = %v, want %v", label, got, want)
		}
	}
}

// TestOriginOf: a recorded origin wins over the label; a run stored
// before origins were recorded is the monitor's by its label alone.
func TestOriginOf(t *testing.T) {
	const (
		unspecified = measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED
		client      = measurev1.RunOrigin_RUN_ORIGIN_CLIENT
		monitor     = measurev1.RunOrigin_RUN_ORIGIN_MONITOR
	)
	for _, tt := range []struct {
		name   string
		origin measurev1.RunOrigin
		label  string
		want   measurev1.RunOrigin
	}{
		{"recorded client", client, "vxlan", client},
		{"recorded monitor", monitor, "monitor-light", monitor},
		{"recorded monitor whatever the label", monitor, "light", monitor},
		{"recorded client whatever the label", client, "monitor-light", client},
		{"old run, monitor label", unspecified, "monitor-light", monitor},
		{"old run, other label", unspecified, "after MTU 9000", client},
		{"old run, no label", unspecified, "", client},
		{"old run, the prefix inside", unspecified, "x-monitor-light", client},
	} {
		t.Run(tt.name, func(t *testing.T) {
			run := &measurev1.Run{Origin: tt.origin, Spec: &measurev1.RunSpec{Label: tt.label}}
			if got := OriginOf(run); got != tt.want {
				t.Errorf("OriginOf = %v, want %v", got, tt.want)
			}
		})
	}
	if got := OriginOf(nil); got != client {
		t.Errorf("OriginOf(nil) = %v, want %v", got, client)
	}
}
