package runs

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestRouteFor(t *testing.T) {
	ip := netip.MustParseAddr
	src := registry.Node{Name: "a", HostIP: ip("172.18.0.11"), PodIP: ip("10.244.1.2")}
	dst := registry.Node{Name: "b", HostIP: ip("172.18.0.12"), PodIP: ip("10.244.2.2"), ServiceIP: ip("10.96.0.12")}
	host, pod := measurev1.Network_NETWORK_HOST, measurev1.Network_NETWORK_POD
	tests := []struct {
		path    measurev1.Path
		src     registry.Node
		want    route
		wantErr string
	}{
		{measurev1.Path_PATH_HOST_TO_HOST, src, route{host, host, dst.HostIP}, ""},
		{measurev1.Path_PATH_HOST_TO_POD, src, route{host, pod, dst.PodIP}, ""},
		{measurev1.Path_PATH_POD_TO_POD, src, route{pod, pod, dst.PodIP}, ""},
		{measurev1.Path_PATH_POD_TO_SERVICE, src, route{pod, pod, dst.ServiceIP}, ""},
		{measurev1.Path_PATH_HOST_TO_SERVICE, src, route{host, pod, dst.ServiceIP}, ""},
		{measurev1.Path_PATH_POD_TO_POD, registry.Node{Name: "a", HostIP: src.HostIP}, route{}, `node "a" registered no pod endpoint`},
		{measurev1.Path_PATH_UNSPECIFIED, src, route{}, "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.path.String(), func(t *testing.T) {
			got, err := routeFor(tt.path, tt.src, dst)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("routeFor = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	noService := dst
	noService.ServiceIP = netip.Addr{}
	if _, err := routeFor(measurev1.Path_PATH_POD_TO_SERVICE, src, noService); err == nil || !strings.Contains(err.Error(), `node "b" registered no address for pod-service`) {
		t.Errorf("missing service IP: err = %v", err)
	}
}

// A run left running by a coordinator that died is interrupted at the next
// start, and GetRun says so.
func TestUnfinishedRunsAreInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for id, state := range map[string]measurev1.RunState{
		"run-running":   measurev1.RunState_RUN_STATE_RUNNING,
		"run-queued":    measurev1.RunState_RUN_STATE_QUEUED,
		"run-succeeded": measurev1.RunState_RUN_STATE_SUCCEEDED,
	} {
		if err := st.PutRun(ctx, &measurev1.Run{RunId: id, State: state}); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := registry.New(ctx, registry.Config{Recorder: st})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(ctx, Config{Store: st, Agents: reg, IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for id, want := range map[string]measurev1.RunState{
		"run-running":   measurev1.RunState_RUN_STATE_INTERRUPTED,
		"run-queued":    measurev1.RunState_RUN_STATE_INTERRUPTED,
		"run-succeeded": measurev1.RunState_RUN_STATE_SUCCEEDED,
	} {
		run, err := m.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.GetState() != want {
			t.Errorf("%s: state %v, want %v", id, run.GetState(), want)
		}
	}
	if _, err := m.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(nope) err = %v, want ErrNotFound", err)
	}
	// Watching an ended run gives its state once and ends.
	ch, err := m.Watch(ctx, "run-running")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for u := range ch {
		n++
		if u.Run.GetState() != measurev1.RunState_RUN_STATE_INTERRUPTED {
			t.Errorf("watch state %v", u.Run.GetState())
		}
	}
	if n != 1 {
		t.Errorf("%d updates for an ended run, want 1", n)
	}
}
