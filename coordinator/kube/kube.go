// Package kube gives every node's pod endpoint its own ClusterIP Service,
// so that a pod->service or host->service test reaches the node it names:
// a Service without selector named after the node (Name) and an
// EndpointSlice that points at that node's pod IP alone. Services creates
// them when an agent registers (Ensure), repoints the slice when the pod
// IP changes, and deletes those of nodes that left (Remove, Prune). With
// coordinator/identity it is the coordinator's only package that talks to
// the API server; the registry sees it as a function from node and pod IP
// to ClusterIP.
//
// The Service carries one named port per test server the node's agent
// registered (ServicePorts); the EndpointSlice carries the same names and
// numbers, as kube-proxy matches them by name. Every object is labelled
// app.kubernetes.io/managed-by=meshperf and meshperf.io/node, and Prune
// touches nothing else.
//
// It also keeps the informer caches the coordinator's checks read instead
// of the API: the Nodes' and pod endpoints' addresses a registration must
// match (Addresses) and the agent pods an identity token is checked
// against (AgentPods).
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/tick"
)

// Labels and annotations on the objects the coordinator manages.
const (
	// LabelManagedBy marks every managed object, with value ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "meshperf"
	// LabelNode holds the node the object fronts (the node name when it is
	// a valid label value, else the hashed form that Name uses).
	LabelNode = "meshperf.io/node"
	// AnnotationNodeName holds the node name as the agent registered it.
	AnnotationNodeName = "meshperf.io/node-name"
	// sliceController names this coordinator in the EndpointSlice's
	// endpointslice.kubernetes.io/managed-by label, so that Kubernetes'
	// own EndpointSlice controller leaves the slice alone.
	sliceController = "meshperf.io/coordinator"
)

// DefaultNamespace is where the Services live when Config.Namespace is
// empty.
const DefaultNamespace = "meshperf"

// ErrNotManaged means a Service or EndpointSlice with the name the
// coordinator wants exists but is not labelled as managed by meshperf; the
// coordinator never takes over or deletes such an object.
var ErrNotManaged = errors.New("object exists and is not managed by meshperf")

// InCluster returns a client for the cluster the coordinator runs in, from
// its pod's service account (rest.InClusterConfig). The account needs get,
// list, watch, create, update and delete on services and
// discovery.k8s.io/endpointslices in the namespace; to check the agents'
// identity tokens (coordinator/identity) and addresses (Addresses), get,
// list and watch on pods and get on daemonsets there, and create on
// authentication.k8s.io tokenreviews and list and watch on nodes
// (cluster-scoped): deploy/kubernetes/base/coordinator-rbac.yaml.
// The client's rate limits are o's.
func InCluster(o ClientOptions) (kubernetes.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: in-cluster config: %w", err)
	}
	if err := o.apply(cfg); err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: client: %w", err)
	}
	return c, nil
}

// The coordinator's default API rate limits (ClientOptions). A fleet of
// 5,000 agents registering again after a restart costs 10,000 requests
// (a TokenReview and a pod read per agent; their Services come from
// Watch's cache): over half an hour at client-go's own limits, 5 requests
// a second after a burst of 10, under 4 minutes at these.
const (
	// DefaultQPS is ClientOptions.QPS's default, in requests per second.
	DefaultQPS = 50
	// DefaultBurst is ClientOptions.Burst's default, in requests.
	DefaultBurst = 100
)

// ClientOptions are the API client's rate limits.
type ClientOptions struct {
	// QPS is the most requests per second, after a burst; zero means
	// DefaultQPS. Negative is an error.
	QPS float32
	// Burst is the most requests at once above QPS; zero means
	// DefaultBurst, or QPS rounded up if that is more. Negative, or under
	// QPS rounded up, is an error.
	Burst int
}

// apply sets cfg's rate limits to o's, naming the flag of a bad one.
func (o ClientOptions) apply(cfg *rest.Config) error {
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = max(DefaultBurst, int(math.Ceil(float64(o.QPS))))
	}
	switch {
	case o.QPS < 0 || math.IsNaN(float64(o.QPS)) || math.IsInf(float64(o.QPS), 0):
		return fmt.Errorf("kube: --kube-qps %v is not a positive number of requests per second", o.QPS)
	case o.Burst < 0 || float64(o.Burst) < math.Ceil(float64(o.QPS)):
		return fmt.Errorf("kube: --kube-burst %d must be at least --kube-qps %v (rounded up)", o.Burst, o.QPS)
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	return nil
}

// Config configures New.
type Config struct {
	// Client talks to the API server; required. In a cluster it is built
	// from rest.InClusterConfig; tests pass a fake clientset.
	Client kubernetes.Interface
	// Namespace holds the Services and EndpointSlices; empty means
	// DefaultNamespace.
	Namespace string
	// Logger receives creations, updates and deletions; nil means discard.
	Logger *slog.Logger
}

// Services keeps one Service and one EndpointSlice per node. It holds no
// state of its own beyond its Config and, once Watch runs, a cache of
// those objects: the API server is the truth, so it is safe for
// concurrent use, and a restarted coordinator finds its objects again by
// name. Ensure calls run concurrently with each other but
// never with a Prune, so that a prune cannot delete the objects of a node
// that registers while it runs (see PruneEvery).
type Services struct {
	client kubernetes.Interface
	ns     string
	log    *slog.Logger
	// lock is a read-write lock that ctx can interrupt: Ensure takes one
	// unit, Prune all of them.
	lock *semaphore.Weighted
	// cache holds the informers once Watch started them (cache.go).
	cache atomic.Pointer[objectCache]
}

// lockUnits is the weight of lock: more than concurrent Ensure calls will
// ever be.
const lockUnits = 1 << 30

// New checks cfg and returns a Services.
func New(cfg Config) (*Services, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: Config.Client is nil")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	cfg.Logger = logger(cfg.Logger)
	return &Services{client: cfg.Client, ns: cfg.Namespace, log: cfg.Logger, lock: semaphore.NewWeighted(lockUnits)}, nil
}

// Ensure makes node's Service and EndpointSlice exist, carry the ports of
// the servers its agent registered (ServicePorts) and point at podIP, and
// returns the Service's ClusterIP. It creates what is missing, updates
// what differs (a new pod IP changes the slice only; new ports change
// both, and the ClusterIP stays) and leaves alone what is right, so
// calling it again is cheap: two reads, from the cache once Watch runs. Ports that ServicePorts refuses
// are an error naming them. An object of that name that meshperf does not
// manage is an error wrapping ErrNotManaged; API errors are wrapped and
// name the object. It waits for a Prune in progress to end.
func (s *Services) Ensure(ctx context.Context, node string, podIP netip.Addr, servers protocol.ServerPorts) (netip.Addr, error) {
	if node == "" {
		return netip.Addr{}, errors.New("kube: empty node name")
	}
	if !podIP.IsValid() || podIP.Zone() != "" || podIP.Is4In6() {
		return netip.Addr{}, fmt.Errorf("kube: node %q: pod IP %v is not a plain IPv4 or IPv6 address", node, podIP)
	}
	ports, err := ServicePorts(servers)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("kube: node %q: %w", node, err)
	}
	if err := s.lock.Acquire(ctx, 1); err != nil {
		return netip.Addr{}, fmt.Errorf("kube: node %q: waiting for a prune to end: %w", node, err)
	}
	defer s.lock.Release(1)
	name := Name(node)
	svc, err := retried(s, func(fresh bool) (*corev1.Service, error) {
		return s.ensureService(ctx, node, name, family(podIP), ports, fresh)
	})
	if err != nil {
		return netip.Addr{}, err
	}
	clusterIP, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("kube: Service %s/%s has no ClusterIP (%q)", s.ns, name, svc.Spec.ClusterIP)
	}
	if _, err := retried(s, func(fresh bool) (struct{}, error) {
		return struct{}{}, s.ensureSlice(ctx, node, name, svc, podIP, ports, fresh)
	}); err != nil {
		return netip.Addr{}, err
	}
	return clusterIP, nil
}

// Remove deletes node's EndpointSlice and Service; absent ones are no
// error, and neither is deleted if meshperf does not manage it.
func (s *Services) Remove(ctx context.Context, node string) error {
	name := Name(node)
	var errs []error
	if sl, err := s.client.DiscoveryV1().EndpointSlices(s.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		if managed(sl.Labels) {
			errs = append(errs, s.deleteSlice(ctx, name))
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("kube: get EndpointSlice %s/%s: %w", s.ns, name, err))
	}
	if svc, err := s.client.CoreV1().Services(s.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		if managed(svc.Labels) {
			errs = append(errs, s.deleteService(ctx, name))
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("kube: get Service %s/%s: %w", s.ns, name, err))
	}
	return errors.Join(errs...)
}

// Prune deletes every managed Service and EndpointSlice of a node that is
// not in keep (nodes that departed, or that a previous coordinator knew).
// It goes on after an error and returns them all. Its deletions go in
// chunks of pruneChunk; Ensure calls wait for the chunk in progress.
func (s *Services) Prune(ctx context.Context, keep map[string]bool) error {
	return s.pruneWith(ctx, func() map[string]bool { return keep })
}

// Bounds of a prune. Its deletions go in chunks, each under the lock that
// keeps Ensure calls out, so that registrations wait for one chunk, not
// for a whole departed pool: 1,000 nodes are 2,000 deletions, 40 s at the
// default rate limit.
const (
	// pruneChunk is the most objects one chunk deletes.
	pruneChunk = 16
	// pruneCallTimeout bounds a prune's listing, and each chunk.
	pruneCallTimeout = 30 * time.Second
)

// pruneWith is Prune with keep read after the listing, and again at each
// chunk of deletions while no Ensure runs and none starts: a node in keep
// then, or whose Ensure starts after, keeps its objects.
func (s *Services) pruneWith(ctx context.Context, keepFunc func() map[string]bool) error {
	type object struct{ kind, name string }
	var (
		doomed []object
		errs   []error
	)
	listCtx, cancel := context.WithTimeout(ctx, pruneCallTimeout)
	sel := metav1.ListOptions{LabelSelector: managedSelector}
	if sls, err := s.client.DiscoveryV1().EndpointSlices(s.ns).List(listCtx, sel); err != nil {
		errs = append(errs, fmt.Errorf("kube: list EndpointSlices in %s: %w", s.ns, err))
	} else {
		for _, sl := range sls.Items {
			doomed = append(doomed, object{"EndpointSlice", sl.Name})
		}
	}
	if svcs, err := s.client.CoreV1().Services(s.ns).List(listCtx, sel); err != nil {
		errs = append(errs, fmt.Errorf("kube: list Services in %s: %w", s.ns, err))
	} else {
		for _, svc := range svcs.Items {
			doomed = append(doomed, object{"Service", svc.Name})
		}
	}
	cancel()
	// A first look at keep, without the lock: what it keeps now is not
	// deleted, and the rest is looked at again under the lock, chunk by
	// chunk. A prune of a fleet that lost nobody takes the lock no time.
	kept := nodeNames(keepFunc())
	doomed = slices.DeleteFunc(doomed, func(o object) bool { return kept[o.name] })
	for chunk := range slices.Chunk(doomed, pruneChunk) {
		if err := s.pruneChunk(ctx, keepFunc, func(ctx context.Context, kept map[string]bool) []error {
			var errs []error
			for _, o := range chunk {
				switch {
				case kept[o.name]:
				case o.kind == "Service":
					errs = append(errs, s.deleteService(ctx, o.name))
				default:
					errs = append(errs, s.deleteSlice(ctx, o.name))
				}
			}
			return errs
		}); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// pruneChunk runs del under the whole lock, with the object names of the
// nodes keepFunc keeps, within pruneCallTimeout.
func (s *Services) pruneChunk(ctx context.Context, keepFunc func() map[string]bool, del func(context.Context, map[string]bool) []error) error {
	if err := s.lock.Acquire(ctx, lockUnits); err != nil {
		return fmt.Errorf("kube: prune: waiting for Ensure calls to end: %w", err)
	}
	defer s.lock.Release(lockUnits)
	ctx, cancel := context.WithTimeout(ctx, pruneCallTimeout)
	defer cancel()
	return errors.Join(del(ctx, nodeNames(keepFunc()))...)
}

// nodeNames are the object names (Name) of the nodes keep keeps.
func nodeNames(keep map[string]bool) map[string]bool {
	names := make(map[string]bool, len(keep))
	for node, ok := range keep {
		if ok {
			names[Name(node)] = true
		}
	}
	return names
}

// PruneEvery calls Prune with keep() every interval until ctx ends, then
// returns nil. The first call comes after one interval, so that agents
// reconnecting to a restarted coordinator register before anything is
// pruned. Errors are logged, and the next tick tries again.
//
// keep() is called once after the listing, and again before each chunk
// of deletions, once no Ensure runs, and none starts until the chunk is
// done: a node whose Ensure ended must be in keep() by then (the registry
// counts it from before its ServiceIPs call), and one whose Ensure waits
// creates its objects after the chunk.
func (s *Services) PruneEvery(ctx context.Context, interval time.Duration, keep func() map[string]bool) error {
	if interval <= 0 {
		return fmt.Errorf("kube: prune interval %v is not positive", interval)
	}
	tick.Every(ctx, interval, func() {
		if err := s.pruneWith(ctx, keep); err != nil && ctx.Err() == nil {
			s.log.Error("prune node services", "namespace", s.ns, "err", err)
		}
	})
	return nil
}

func (s *Services) deleteSlice(ctx context.Context, name string) error {
	return s.deleted("EndpointSlice", name, s.client.DiscoveryV1().EndpointSlices(s.ns).Delete(ctx, name, metav1.DeleteOptions{}))
}

func (s *Services) deleteService(ctx context.Context, name string) error {
	return s.deleted("Service", name, s.client.CoreV1().Services(s.ns).Delete(ctx, name, metav1.DeleteOptions{}))
}

// deleted handles err, the answer to deleting the node object of kind
// ("Service", "EndpointSlice") called name: a deletion is logged, an
// object already absent is no error, another error is returned wrapped.
func (s *Services) deleted(kind, name string, err error) error {
	switch {
	case err == nil:
		s.wrote(kind, name, nil)
		s.log.Info("deleted node "+kind, "namespace", s.ns, "name", name)
	case apierrors.IsNotFound(err):
	default:
		return fmt.Errorf("kube: delete %s %s/%s: %w", kind, s.ns, name, err)
	}
	return nil
}

// labels are the labels of node's objects.
func labels(node string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelNode: nodeLabelValue(node)}
}

func managed(l map[string]string) bool { return l[LabelManagedBy] == ManagedBy }

// hasAll reports whether got holds every key of want with its value.
func hasAll(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// merged returns a copy of got with want's entries set.
func merged(got, want map[string]string) map[string]string {
	out := maps.Clone(got)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}

func family(ip netip.Addr) corev1.IPFamily {
	if ip.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}
