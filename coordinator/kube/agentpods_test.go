package kube

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

// TestAgentPods: the cache holds the agent pods of its namespace (by the
// selector), slimmed to what an identity check reads; while the
// informer's watch fails it answers none, since its cache may then be
// behind the API server for as long as that lasts.
func TestAgentPods(t *testing.T) {
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-a", Namespace: DefaultNamespace, UID: "uid-a",
		Labels: map[string]string{"app.kubernetes.io/name": "meshperf-agent"}, Annotations: map[string]string{"big": "x"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "meshperf-agent", UID: "uid-ds"}}},
		Spec:   corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "meshperf-agent", Containers: []corev1.Container{{Name: "agent"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: DefaultNamespace, Labels: map[string]string{"app": "web"}}}
	elsewhere := agent.DeepCopy()
	elsewhere.Namespace, elsewhere.Name = "default", "agent-x"
	for _, tt := range []struct {
		name       string
		watchFails bool
	}{{"watching", false}, {"watch failing", true}} {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(agent, other, elsewhere)
			if tt.watchFails {
				c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
					return true, nil, errors.New("the API server is overloaded")
				})
			}
			p, err := NewAgentPods(t.Context(), AgentPodsConfig{Client: c})
			if err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 10*time.Second, time.Millisecond, "the first list", p.pods.HasSynced)
			if tt.watchFails {
				// The watch has failed since the list (its error handler
				// ran): nothing is answered from the cache.
				testutil.Eventually(t, 10*time.Second, time.Millisecond, "the watch's failure", func() bool {
					p.mu.Lock()
					defer p.mu.Unlock()
					return p.stale
				})
				if pod, ok := p.Get("agent-a"); ok {
					t.Errorf("Get(agent-a) = %v from a cache whose watch fails, want none", pod)
				}
				return
			}
			pod, ok := p.Get("agent-a")
			if !ok {
				t.Fatal("Get(agent-a): not cached")
			}
			if pod.UID != "uid-a" || pod.Spec.NodeName != "node-a" || pod.Spec.ServiceAccountName != "meshperf-agent" ||
				pod.Status.Phase != corev1.PodRunning || len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != "uid-ds" {
				t.Errorf("cached agent-a = %+v, want its uid, node, service account, phase and controller", pod)
			}
			if len(pod.Annotations) != 0 || len(pod.Spec.Containers) != 0 {
				t.Errorf("cached agent-a keeps %d annotations and %d containers, want them slimmed away", len(pod.Annotations), len(pod.Spec.Containers))
			}
			for _, name := range []string{"web", "agent-x", "no-such-pod"} {
				if _, ok := p.Get(name); ok {
					t.Errorf("Get(%s) found a pod: not an agent pod of the namespace", name)
				}
			}
		})
	}
}
