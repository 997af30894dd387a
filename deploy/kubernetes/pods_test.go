package kubernetes

import (
	"path"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// podOf is the pod template of the DaemonSet or Deployment named name, or
// a pod with one container named "NAME (missing)" when there is none.
func podOf(m *manifests, name string) *corev1.PodSpec {
	if ds := find[*appsv1.DaemonSet](m, name); ds != nil {
		return &ds.Spec.Template.Spec
	}
	if d := find[*appsv1.Deployment](m, name); d != nil {
		return &d.Spec.Template.Spec
	}
	return &corev1.PodSpec{Containers: []corev1.Container{{Name: name + " (missing)"}}}
}

func agentPod(m *manifests) *corev1.PodSpec       { return podOf(m, agentName) }
func endpointPod(m *manifests) *corev1.PodSpec    { return podOf(m, endpointName) }
func coordinatorPod(m *manifests) *corev1.PodSpec { return podOf(m, coordinator) }

// mountsHostPath reports whether every container of ps mounts the hostPath
// dir at mountPath.
func mountsHostPath(ps *corev1.PodSpec, dir, mountPath string) bool {
	for _, c := range ps.Containers {
		ok := false
		for _, vm := range c.VolumeMounts {
			for _, v := range ps.Volumes {
				ok = ok || v.Name == vm.Name && v.HostPath != nil && path.Clean(v.HostPath.Path) == dir && vm.MountPath == mountPath
			}
		}
		if !ok {
			return false
		}
	}
	return len(ps.Containers) > 0
}
