// Package kubetest stands in for the Kubernetes API server in tests of
// coordinator/kube and of the coordinator's --kubernetes wiring: client-go's
// fake clientset, which stores objects but allocates nothing, plus what the
// API server would do on Service create.
package kubetest

import (
	"fmt"
	"strconv"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset returns a fake clientset holding objects that, like the API
// server, allocates a ClusterIP (10.96.0.1, 10.96.0.2, ...) and a UID
// ("uid-1", ...) to every Service it creates, and a new resourceVersion
// ("1", "2", ...) to every object it creates or updates, so that a cache
// can tell a version it has not seen. Its Actions are every call made,
// for tests that check them against RBAC.
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objects...)
	var n, version atomic.Int64
	stamp := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if m, ok := o.GetObject().(metav1.Object); ok {
				m.SetResourceVersion(strconv.FormatInt(version.Add(1), 10))
			}
		}
		return false, nil, nil // the object tracker stores it
	}
	for _, verb := range []string{"create", "update"} {
		c.PrependReactor(verb, "*", stamp)
	}
	c.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
		i := n.Add(1)
		svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", i/250, i%250)
		svc.UID = types.UID(fmt.Sprintf("uid-%d", i))
		return false, nil, nil // the object tracker stores it
	})
	return c
}
