package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// This file keeps Ensure's reads off the API server: informers on the
// managed Services and EndpointSlices, so that a node whose objects are
// right, the common case when a restarted coordinator's fleet registers
// again, costs no API call. A read the cache cannot answer (before its
// first list, or an object it does not hold) goes to the API server, and
// a write the cache made stale (a conflict, or an object deleted since)
// is done again from a fresh read.

// Watch starts informers on the namespace's managed Services and
// EndpointSlices (LabelManagedBy, LabelNode), which run until ctx ends;
// once their first lists are in, Ensure reads from them. Call it once,
// before the first Ensure; without it every Ensure reads from the API
// server. The account needs list and watch on both.
func (s *Services) Watch(ctx context.Context) {
	f := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(s.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedSelector }))
	svcs, slices := f.Core().V1().Services().Informer(), f.Discovery().V1().EndpointSlices().Informer()
	f.Start(ctx.Done())
	s.cache.Store(&objectCache{services: svcs, slices: slices})
	s.log.Info("watching the node Services and EndpointSlices", "namespace", s.ns)
}

// managedSelector selects the objects Services manages.
const managedSelector = LabelManagedBy + "=" + ManagedBy + "," + LabelNode

// objectCache holds the informers Watch started, and the objects this
// process wrote that they may not have seen yet.
type objectCache struct {
	services, slices cache.SharedIndexInformer

	mu sync.Mutex
	// unseen are the objects written (or deleted) here whose new version
	// the informer had not shown at the last look, by kind and name: read
	// from the API server until it does, or for writtenTTL.
	unseen map[string]written
}

// written is a write of this process to one object.
type written struct {
	version string // the resourceVersion written; "" for a deletion
	at      time.Time
}

// writtenTTL bounds how long a write is waited for in the informer's
// cache: a watch that broke relists within it.
const writtenTTL = time.Minute

// wrote records that this process wrote obj (of kind, called name), or
// deleted it when obj is nil, so that Ensure reads it from the API server
// until the informer shows the change. Without Watch it does nothing.
func (s *Services) wrote(kind, name string, obj metav1.Object) {
	c := s.cache.Load()
	if c == nil {
		return
	}
	w := written{at: time.Now()}
	if obj != nil {
		w.version = obj.GetResourceVersion()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unseen == nil {
		c.unseen = map[string]written{}
	}
	c.unseen[kind+"/"+name] = w
}

// seen reports whether inf's cache shows this process's last write to the
// object of kind called name (or there was none, or it is older than
// writtenTTL), and the cached object if it holds one.
func (c *objectCache) seen(inf cache.SharedIndexInformer, kind, ns, name string) (obj any, ok bool) {
	obj, exists, err := inf.GetStore().GetByKey(ns + "/" + name)
	if err != nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w, pending := c.unseen[kind+"/"+name]
	if pending {
		var version string
		if m, ok := obj.(metav1.Object); exists && ok {
			version = m.GetResourceVersion()
		}
		switch {
		case time.Since(w.at) > writtenTTL, w.version == "" && !exists, w.version != "" && version == w.version:
			delete(c.unseen, kind+"/"+name)
		default:
			return nil, false
		}
	}
	return obj, exists
}

// get reads the object of kind named name: from inf's cache unless fresh,
// else (or if the cache has not listed once, does not hold it, or has not
// shown this process's last write to it) with api, the API server's Get. An object from the cache is shared with it:
// copy it before changing it. API errors are wrapped, naming the object.
func get[T any](ctx context.Context, s *Services, inf func(*objectCache) cache.SharedIndexInformer, kind, name string, fresh bool,
	api func(context.Context, string, metav1.GetOptions) (*T, error)) (*T, error) {
	if c := s.cache.Load(); !fresh && c != nil && inf(c).HasSynced() {
		if obj, ok := c.seen(inf(c), kind, s.ns, name); ok {
			if v, ok := obj.(*T); ok {
				return v, nil
			}
		}
	}
	v, err := api(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: get %s %s/%s: %w", kind, s.ns, name, err)
	}
	return v, nil
}

// getService reads the Service named name (get).
func (s *Services) getService(ctx context.Context, name string, fresh bool) (*corev1.Service, error) {
	return get(ctx, s, func(c *objectCache) cache.SharedIndexInformer { return c.services }, "Service", name, fresh,
		s.client.CoreV1().Services(s.ns).Get)
}

// getSlice reads the EndpointSlice named name (get).
func (s *Services) getSlice(ctx context.Context, name string, fresh bool) (*discoveryv1.EndpointSlice, error) {
	return get(ctx, s, func(c *objectCache) cache.SharedIndexInformer { return c.slices }, "EndpointSlice", name, fresh,
		s.client.DiscoveryV1().EndpointSlices(s.ns).Get)
}

// retried calls f with fresh false, and again with fresh true if what it
// wrote was stale: a conflict (the object changed since the read) or an
// object gone since (NotFound on an update or delete). Without a cache
// the first read was fresh already, and f is called once.
func retried[T any](s *Services, f func(fresh bool) (T, error)) (T, error) {
	v, err := f(false)
	if err != nil && s.cache.Load() != nil && (apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)) {
		return f(true)
	}
	return v, err
}
