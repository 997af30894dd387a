package kube

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// service builds node's Service: no selector (its endpoints are the
// EndpointSlice's), type ClusterIP, single-stack in the pod IP's family,
// with ports.
func (s *Services) service(node, name string, fam corev1.IPFamily, ports []Port) *corev1.Service {
	policy := corev1.IPFamilyPolicySingleStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.ns, Labels: labels(node),
			Annotations: map[string]string{AnnotationNodeName: node},
		},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeClusterIP,
			IPFamilies:     []corev1.IPFamily{fam},
			IPFamilyPolicy: &policy,
		},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: p.Name, Port: p.Port, Protocol: p.Protocol, TargetPort: intstr.FromInt32(p.Port),
		})
	}
	return svc
}

// slice builds node's EndpointSlice: one ready endpoint, the pod IP on
// node, owned by svc (so that deleting the Service collects it too), with
// ports.
func (s *Services) slice(node, name string, svc *corev1.Service, podIP netip.Addr, ports []Port) *discoveryv1.EndpointSlice {
	l := labels(node)
	l[discoveryv1.LabelServiceName] = name
	l[discoveryv1.LabelManagedBy] = sliceController
	addressType := discoveryv1.AddressTypeIPv4
	if podIP.Is6() {
		addressType = discoveryv1.AddressTypeIPv6
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.ns, Labels: l,
			Annotations: map[string]string{AnnotationNodeName: node},
		},
		AddressType: addressType,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{podIP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(node),
		}},
	}
	if svc.UID != "" {
		sl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}}
	}
	for _, p := range ports {
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.Port), Protocol: ptr.To(p.Protocol)})
	}
	return sl
}

// ensureService returns node's Service, created or brought in line with
// want. A Service of the wrong IP family is replaced (the family cannot
// change in place), which changes its ClusterIP.
// fresh reads it from the API server, not the cache (cache.go).
func (s *Services) ensureService(ctx context.Context, node, name string, fam corev1.IPFamily, ports []Port, fresh bool) (*corev1.Service, error) {
	api := s.client.CoreV1().Services(s.ns)
	want := s.service(node, name, fam, ports)
	got, err := s.getService(ctx, name, fresh)
	switch {
	case apierrors.IsNotFound(err):
		return s.createService(ctx, want)
	case err != nil:
		return nil, err
	case !managed(got.Labels):
		return nil, fmt.Errorf("kube: Service %s/%s: %w", s.ns, name, ErrNotManaged)
	case len(got.Spec.IPFamilies) > 0 && got.Spec.IPFamilies[0] != fam:
		s.log.Info("node Service has another IP family than the pod; replacing it", "namespace", s.ns, "name", name,
			"node", node, "family", got.Spec.IPFamilies[0], "want", fam)
		if err := s.deleteService(ctx, name); err != nil {
			return nil, err
		}
		return s.createService(ctx, want)
	}
	if hasAll(got.Labels, want.Labels) && hasAll(got.Annotations, want.Annotations) && len(got.Spec.Selector) == 0 &&
		got.Spec.Type == corev1.ServiceTypeClusterIP && samePorts(got.Spec.Ports, want.Spec.Ports) {
		return got, nil
	}
	up := got.DeepCopy()
	up.Labels = merged(got.Labels, want.Labels)
	up.Annotations = merged(got.Annotations, want.Annotations)
	up.Spec.Selector = nil
	up.Spec.Type = corev1.ServiceTypeClusterIP
	up.Spec.Ports = want.Spec.Ports
	out, err := api.Update(ctx, up, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: update Service %s/%s: %w", s.ns, name, err)
	}
	s.wrote("Service", name, out)
	s.log.Info("updated node Service", "namespace", s.ns, "name", name, "node", node)
	return out, nil
}

func (s *Services) createService(ctx context.Context, want *corev1.Service) (*corev1.Service, error) {
	out, err := s.client.CoreV1().Services(s.ns).Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: create Service %s/%s: %w", s.ns, want.Name, err)
	}
	s.wrote("Service", want.Name, out)
	s.log.Info("created node Service", "namespace", s.ns, "name", want.Name, "node", want.Annotations[AnnotationNodeName],
		"cluster_ip", out.Spec.ClusterIP)
	return out, nil
}

// samePorts compares what the coordinator sets of each port (the API
// server fills in the rest).
func samePorts(got, want []corev1.ServicePort) bool {
	return slices.EqualFunc(got, want, func(a, b corev1.ServicePort) bool {
		return a.Name == b.Name && a.Port == b.Port && a.Protocol == b.Protocol && a.TargetPort == b.TargetPort
	})
}

// ensureSlice makes node's EndpointSlice point at podIP. A slice of the
// wrong address type is replaced (the type cannot change in place). fresh
// reads it from the API server, not the cache (cache.go).
func (s *Services) ensureSlice(ctx context.Context, node, name string, svc *corev1.Service, podIP netip.Addr, ports []Port, fresh bool) error {
	api := s.client.DiscoveryV1().EndpointSlices(s.ns)
	want := s.slice(node, name, svc, podIP, ports)
	got, err := s.getSlice(ctx, name, fresh)
	switch {
	case apierrors.IsNotFound(err):
		return s.createSlice(ctx, want)
	case err != nil:
		return err
	case !managed(got.Labels):
		return fmt.Errorf("kube: EndpointSlice %s/%s: %w", s.ns, name, ErrNotManaged)
	case got.AddressType != want.AddressType:
		if err := s.deleteSlice(ctx, name); err != nil {
			return err
		}
		return s.createSlice(ctx, want)
	}
	if hasAll(got.Labels, want.Labels) && hasAll(got.Annotations, want.Annotations) && sameEndpoints(got.Endpoints, want.Endpoints) &&
		sameEndpointPorts(got.Ports, want.Ports) && sameOwners(got.OwnerReferences, want.OwnerReferences) {
		return nil
	}
	old := ""
	if len(got.Endpoints) > 0 && len(got.Endpoints[0].Addresses) > 0 {
		old = got.Endpoints[0].Addresses[0]
	}
	up := got.DeepCopy()
	up.Labels = merged(got.Labels, want.Labels)
	up.Annotations = merged(got.Annotations, want.Annotations)
	up.Endpoints, up.Ports, up.OwnerReferences = want.Endpoints, want.Ports, want.OwnerReferences
	out, err := api.Update(ctx, up, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("kube: update EndpointSlice %s/%s: %w", s.ns, name, err)
	}
	s.wrote("EndpointSlice", name, out)
	s.log.Info("updated node EndpointSlice", "namespace", s.ns, "name", name, "node", node, "old_pod_ip", old, "pod_ip", podIP)
	return nil
}

func (s *Services) createSlice(ctx context.Context, want *discoveryv1.EndpointSlice) error {
	out, err := s.client.DiscoveryV1().EndpointSlices(s.ns).Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("kube: create EndpointSlice %s/%s: %w", s.ns, want.Name, err)
	}
	s.wrote("EndpointSlice", want.Name, out)
	s.log.Info("created node EndpointSlice", "namespace", s.ns, "name", want.Name, "node", want.Annotations[AnnotationNodeName],
		"pod_ip", want.Endpoints[0].Addresses[0])
	return nil
}

func sameEndpoints(got, want []discoveryv1.Endpoint) bool {
	return slices.EqualFunc(got, want, func(a, b discoveryv1.Endpoint) bool {
		return slices.Equal(a.Addresses, b.Addresses) && ptr.Equal(a.NodeName, b.NodeName) &&
			ptr.Equal(a.Conditions.Ready, b.Conditions.Ready) && ptr.Equal(a.Conditions.Serving, b.Conditions.Serving) &&
			ptr.Equal(a.Conditions.Terminating, b.Conditions.Terminating)
	})
}

func sameEndpointPorts(got, want []discoveryv1.EndpointPort) bool {
	return slices.EqualFunc(got, want, func(a, b discoveryv1.EndpointPort) bool {
		return ptr.Equal(a.Name, b.Name) && ptr.Equal(a.Port, b.Port) && ptr.Equal(a.Protocol, b.Protocol)
	})
}

func sameOwners(got, want []metav1.OwnerReference) bool {
	return slices.EqualFunc(got, want, func(a, b metav1.OwnerReference) bool {
		return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID
	})
}
