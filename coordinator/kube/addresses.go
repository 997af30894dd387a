package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// DefaultEndpointSelector selects the pod endpoints (the
// meshperf-endpoint DaemonSet's pods) when AddressesConfig.EndpointSelector
// is empty.
const DefaultEndpointSelector = "app.kubernetes.io/name=meshperf-endpoint"

// ErrNotFound means the API server knows no such Node, or no running pod
// endpoint on it (yet: an informer's cache lags the API server a little).
var ErrNotFound = errors.New("not found in the cluster")

// AddressesConfig configures NewAddresses.
type AddressesConfig struct {
	// Client talks to the API server; required.
	Client kubernetes.Interface
	// Namespace is where the pod endpoints run; empty means
	// DefaultNamespace.
	Namespace string
	// EndpointSelector is the label selector of the pod endpoints; empty
	// means DefaultEndpointSelector.
	EndpointSelector string
	// Logger receives the informers' start; nil means discard.
	Logger *slog.Logger
}

// Addresses tells which addresses the API server gives each node: its
// Node object's InternalIP and ExternalIP addresses, and the
// status.podIPs of the pod endpoints scheduled on it. It answers from two
// informers' caches (Nodes cluster-wide, the pod endpoints of one
// namespace), kept by one list and a watch each, so that a registration
// costs no API call however many nodes register at once; the caches hold
// only names, addresses and the pods' node names, not whole objects (some
// 100 bytes a node at 5,000 nodes). It is safe for concurrent use.
type Addresses struct {
	nodes, pods cache.SharedIndexInformer
	selector    klabels.Selector
}

// podsByNode indexes the pod endpoints by spec.nodeName.
const podsByNode = "nodeName"

// NewAddresses starts the informers, which run until ctx ends; their
// first lists complete in the background (NodeIPs and EndpointPodIPs wait
// for them). The account needs list and watch on nodes (cluster-wide) and
// on pods in the namespace.
func NewAddresses(ctx context.Context, cfg AddressesConfig) (*Addresses, error) {
	pods, err := newPodInformer(cfg.Client, cfg.Namespace, cmp.Or(cfg.EndpointSelector, DefaultEndpointSelector), slimPod)
	if err != nil {
		return nil, fmt.Errorf("kube: pod endpoints: %w", err)
	}
	nodeFactory := informers.NewSharedInformerFactory(cfg.Client, 0)
	a := &Addresses{nodes: nodeFactory.Core().V1().Nodes().Informer(), pods: pods.informer, selector: pods.selector}
	if err := a.nodes.SetTransform(slimNode); err != nil {
		return nil, fmt.Errorf("kube: node informer: %w", err)
	}
	if err := a.pods.AddIndexers(cache.Indexers{podsByNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("kube: pod informer: %w", err)
	}
	nodeFactory.Start(ctx.Done())
	pods.factory.Start(ctx.Done())
	logger(cfg.Logger).Info("watching Nodes and pod endpoints for the registrations' address checks", "namespace", pods.namespace, "endpoint_selector", pods.selector.String())
	return a, nil
}

// slimNode keeps what NodeIPs needs of a Node: its name and addresses.
var slimNode = slim(func(n *corev1.Node) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion},
		Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}
})

// slimPod keeps what EndpointPodIPs needs of a pod.
var slimPod = slim(func(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, ResourceVersion: p.ResourceVersion,
		DeletionTimestamp: p.DeletionTimestamp}, Spec: corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs}}
})

// wait waits for the informers' first lists, until ctx ends.
func (a *Addresses) wait(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), a.nodes.HasSynced, a.pods.HasSynced) {
		return fmt.Errorf("the Node and pod caches have not synced with the API server: %w", context.Cause(ctx))
	}
	return nil
}

// NodeIPs returns the InternalIP and ExternalIP addresses of node's Node
// object; the error wraps ErrNotFound if there is no such Node.
func (a *Addresses) NodeIPs(ctx context.Context, node string) ([]netip.Addr, error) {
	if err := a.wait(ctx); err != nil {
		return nil, err
	}
	obj, ok, err := a.nodes.GetStore().GetByKey(node)
	if err != nil {
		return nil, fmt.Errorf("Node %q: %w", node, err) //nolint:staticcheck // ST1005: Node is the Kubernetes kind
	}
	if !ok {
		return nil, fmt.Errorf("Node %q: %w", node, ErrNotFound) //nolint:staticcheck // ST1005: Node is the Kubernetes kind
	}
	var out []netip.Addr
	for _, addr := range obj.(*corev1.Node).Status.Addresses {
		if addr.Type != corev1.NodeInternalIP && addr.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(addr.Address); err == nil && !slices.Contains(out, ip.Unmap()) {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// EndpointPodIPs returns the status.podIPs (or podIP) of the pod
// endpoints on node that are neither finished nor being deleted; the
// error wraps ErrNotFound if there is none.
func (a *Addresses) EndpointPodIPs(ctx context.Context, node string) ([]netip.Addr, error) {
	if err := a.wait(ctx); err != nil {
		return nil, err
	}
	objs, err := a.pods.GetIndexer().ByIndex(podsByNode, node)
	if err != nil {
		return nil, fmt.Errorf("pod endpoints on node %q: %w", node, err)
	}
	var out []netip.Addr
	found := false
	for _, obj := range objs {
		p := obj.(*corev1.Pod)
		if !a.selector.Matches(klabels.Set(p.Labels)) || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		found = true
		ips := []string{p.Status.PodIP}
		for _, pi := range p.Status.PodIPs {
			ips = append(ips, pi.IP)
		}
		for _, s := range ips {
			if ip, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, ip.Unmap()) {
				out = append(out, ip.Unmap())
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("no pod endpoint (%s) on node %q: %w", a.selector, node, ErrNotFound)
	}
	return out, nil
}
