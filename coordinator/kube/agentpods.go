package kube

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// DefaultAgentSelector selects the agent DaemonSet's pods (deploy/kubernetes
// and the Helm chart) when AgentPodsConfig.Selector is empty.
const DefaultAgentSelector = "app.kubernetes.io/name=meshperf-agent"

// AgentPodsConfig configures NewAgentPods.
type AgentPodsConfig struct {
	// Client talks to the API server; required.
	Client kubernetes.Interface
	// Namespace is where the agents run; empty means DefaultNamespace.
	Namespace string
	// Selector is the label selector of the agent pods; empty means
	// DefaultAgentSelector.
	Selector string
	// Logger receives the informer's start; nil means discard.
	Logger *slog.Logger
}

// AgentPods is an informer's cache of the agent pods of one namespace, so
// that checking an agent's identity (coordinator/identity.Token) after a
// coordinator restart costs a TokenReview per agent and no pod read. It
// keeps what that check reads of a pod: name, UID, controller, service
// account, node, phase and deletion, some 300 bytes a pod. It is safe for
// concurrent use.
type AgentPods struct {
	pods      cache.SharedIndexInformer
	namespace string

	mu sync.Mutex
	// stale is set when the informer's list or watch failed, with the
	// resource version it had synced to then (staleAt): its cache may
	// then fall behind for as long as the API server refuses it, so Get
	// misses until the informer has synced past staleAt.
	stale   bool
	staleAt string
}

// NewAgentPods starts the informer, which runs until ctx ends; its first
// list completes in the background (Get misses until then). The account
// needs list and watch on pods in the namespace.
func NewAgentPods(ctx context.Context, cfg AgentPodsConfig) (*AgentPods, error) {
	pods, err := newPodInformer(cfg.Client, cfg.Namespace, cmp.Or(cfg.Selector, DefaultAgentSelector), slimAgentPod)
	if err != nil {
		return nil, fmt.Errorf("kube: agent pods: %w", err)
	}
	p := &AgentPods{pods: pods.informer, namespace: pods.namespace}
	if err := p.pods.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		p.mu.Lock()
		p.stale, p.staleAt = true, p.pods.LastSyncResourceVersion()
		p.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, fmt.Errorf("kube: agent pods: %w", err)
	}
	pods.factory.Start(ctx.Done())
	logger(cfg.Logger).Info("watching the agent pods for the identity checks", "namespace", pods.namespace, "selector", pods.selector.String())
	return p, nil
}

// slimAgentPod keeps what an identity check reads of an agent pod.
var slimAgentPod = slim(func(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		OwnerReferences: p.OwnerReferences, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, ServiceAccountName: p.Spec.ServiceAccountName},
		Status: corev1.PodStatus{Phase: p.Status.Phase}}
})

// Get returns the cached agent pod of that name, as the informer last saw
// it (a watch event behind the API server), or false if the cache has
// none: not listed yet, not an agent pod, gone, or the informer's list or
// watch failed and it has not synced since (its cache may be behind for
// as long as that lasts). The pod must not be modified.
func (p *AgentPods) Get(name string) (*corev1.Pod, bool) {
	if !p.pods.HasSynced() || !p.fresh() {
		return nil, false
	}
	obj, ok, err := p.pods.GetStore().GetByKey(p.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	pod, ok := obj.(*corev1.Pod)
	return pod, ok
}

// fresh reports whether the informer has synced since its list or watch
// last failed (or never failed).
func (p *AgentPods) fresh() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stale && p.pods.LastSyncResourceVersion() != p.staleAt {
		p.stale = false
	}
	return !p.stale
}
