package kube

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// node is a Node with addresses of the given types and values.
func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

// endpointPod is a pod of the endpoint DaemonSet (labels) on node with
// the pod IPs ips, in phase.
func endpointPod(name, node string, labels map[string]string, phase corev1.PodPhase, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	for i, ip := range ips {
		if i == 0 {
			p.Status.PodIP = ip
		}
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// TestAddresses: NodeIPs gives a Node's InternalIP and ExternalIP
// addresses, EndpointPodIPs the pod IPs of the running pod endpoints on
// the node (not other pods', not finished ones'), from the informers'
// caches, which follow the API server's changes.
func TestAddresses(t *testing.T) {
	endpoint := map[string]string{"app.kubernetes.io/name": "meshperf-endpoint"}
	other := map[string]string{"app.kubernetes.io/name": "something-else"}
	objects := []runtime.Object{
		node("node-1", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1"}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::1"}),
		node("node-2", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}),
		endpointPod("ep-1", "node-1", endpoint, corev1.PodRunning, "10.244.1.2", "fd00:244::2"),
		endpointPod("web-1", "node-1", other, corev1.PodRunning, "10.244.1.3"),
		endpointPod("ep-2-old", "node-2", endpoint, corev1.PodFailed, "10.244.2.9"),
	}
	c := newFake(t, objects...)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, err := NewAddresses(ctx, AddressesConfig{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	wait, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	tests := []struct {
		name    string
		get     func(context.Context, string) ([]netip.Addr, error)
		node    string
		want    string
		wantErr string
	}{
		{"Node addresses", a.NodeIPs, "node-1", "[10.0.0.1 203.0.113.1 fd00::1]", ""},
		{"no such Node", a.NodeIPs, "node-3", "", `Node "node-3": not found in the cluster`},
		{"pod endpoint's IPs", a.EndpointPodIPs, "node-1", "[10.244.1.2 fd00:244::2]", ""},
		{"only a failed pod endpoint", a.EndpointPodIPs, "node-2", "", `no pod endpoint (app.kubernetes.io/name=meshperf-endpoint) on node "node-2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get(wait, tt.node)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrNotFound) || err.Error() != tt.wantErr+": not found in the cluster" && err.Error() != tt.wantErr {
					t.Errorf("error %v, want ErrNotFound: %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != tt.want {
				t.Errorf("%v, %v; want %s", got, err, tt.want)
			}
		})
	}

	// A node that joins, and its pod endpoint, are known once the watch
	// brings them: no list per registration.
	lists := countLists(c)
	if _, err := c.CoreV1().Nodes().Create(ctx, node("node-3", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.3"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(DefaultNamespace).Create(ctx, endpointPod("ep-3", "node-3", endpoint, corev1.PodRunning, "10.244.3.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ips, err := a.NodeIPs(wait, "node-3")
		pods, perr := a.EndpointPodIPs(wait, "node-3")
		if err == nil && perr == nil {
			if fmt.Sprint(ips, pods) != "[10.0.0.3] [10.244.3.2]" {
				t.Errorf("node-3: %v %v, want [10.0.0.3] [10.244.3.2]", ips, pods)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-3 never known: %v, %v", err, perr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := lists(); n != 0 {
		t.Errorf("%d lists after the informers' first: want none", n)
	}
}

// countLists returns a function that counts the list and get calls made
// on c since countLists.
func countLists(c *fake.Clientset) func() int {
	mark := len(c.Actions())
	return func() int {
		n := 0
		for _, a := range c.Actions()[mark:] {
			if a.GetVerb() == "list" || a.GetVerb() == "get" {
				n++
			}
		}
		return n
	}
}
