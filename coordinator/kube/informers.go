package kube

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// This file holds what the package's informer caches share (Addresses,
// AgentPods): a label-selected pod informer of one namespace, and the
// transform that slims the objects they keep.

// podInformer is an informer of the pods of one namespace that match a
// label selector, each kept as its transform slims it.
type podInformer struct {
	factory   informers.SharedInformerFactory // Start runs the informer
	informer  cache.SharedIndexInformer
	namespace string
	selector  klabels.Selector
}

// newPodInformer returns the informer, not started, of the pods of
// namespace (empty: DefaultNamespace) that match selector, slimmed by
// transform; the error names a selector that does not parse, or a nil
// client.
func newPodInformer(client kubernetes.Interface, namespace, selector string, transform cache.TransformFunc) (*podInformer, error) {
	if client == nil {
		return nil, errors.New("no API client (Client is nil)")
	}
	sel, err := klabels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	namespace = cmp.Or(namespace, DefaultNamespace)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }))
	p := &podInformer{factory: factory, informer: factory.Core().V1().Pods().Informer(), namespace: namespace, selector: sel}
	if err := p.informer.SetTransform(transform); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	return p, nil
}

// logger is log, or a logger that discards if it is nil.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// slim is the informer transform that stores what keep makes of each
// object of type T, and passes anything else (a deleted object's
// tombstone) through as it is.
func slim[T any](keep func(*T) *T) cache.TransformFunc {
	return func(obj any) (any, error) {
		if o, ok := obj.(*T); ok {
			return keep(o), nil
		}
		return obj, nil
	}
}
