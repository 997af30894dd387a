// Package identitytest stands in for the TokenReview API in tests of
// coordinator/identity and of the coordinator's token identity: a reactor
// on client-go's fake clientset that answers TokenReviews from the tokens
// the test issued, and the agent pods those tokens are bound to. Only test
// files import this package.
package identitytest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// Cluster answers TokenReviews on a fake clientset.
type Cluster struct {
	// Clientset is the fake API; its Actions are every call made.
	Clientset *fake.Clientset

	mu      sync.Mutex
	reviews map[string]authenticationv1.TokenReviewStatus
	created int
}

// New adds a TokenReview reactor to c: a token Issue made is authenticated
// for the audiences it was issued for, any other is refused as the API
// server refuses a forged one.
func New(c *fake.Clientset) *Cluster {
	cl := &Cluster{Clientset: c, reviews: map[string]authenticationv1.TokenReviewStatus{}}
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		cl.mu.Lock()
		defer cl.mu.Unlock()
		cl.created++
		st, ok := cl.reviews[tr.Spec.Token]
		if !ok {
			st = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		// The API server authenticates a token only for one of its audiences.
		if st.Authenticated && !slices.ContainsFunc(st.Audiences, func(a string) bool { return slices.Contains(tr.Spec.Audiences, a) }) {
			st = authenticationv1.TokenReviewStatus{Error: "token audiences do not match"}
		}
		out := tr.DeepCopy()
		out.Status = st
		return true, out, nil
	})
	return cl
}

// Token describes a token to Issue.
type Token struct {
	// Namespace and ServiceAccount are the token's user.
	Namespace, ServiceAccount string
	// Pod and PodUID are the pod it is bound to; empty for a token bound to
	// no pod (a legacy secret's).
	Pod, PodUID string
	// Audiences are those it is valid for.
	Audiences []string
	// Expires is its exp claim.
	Expires time.Time
}

// Issue returns a new JWT-shaped token for t (unsigned: only this fake
// reviews it) and records its review.
func (c *Cluster) Issue(t Token) string {
	aud, _ := json.Marshal(t.Audiences)
	claims := fmt.Sprintf(`{"aud":%s,"exp":%d,"sub":"system:serviceaccount:%s:%s"}`, aud, t.Expires.Unix(), t.Namespace, t.ServiceAccount)
	c.mu.Lock()
	defer c.mu.Unlock()
	tok := "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + "." +
		base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "sig-%d", len(c.reviews)))
	extra := map[string]authenticationv1.ExtraValue{}
	if t.Pod != "" {
		extra["authentication.kubernetes.io/pod-name"] = authenticationv1.ExtraValue{t.Pod}
		extra["authentication.kubernetes.io/pod-uid"] = authenticationv1.ExtraValue{t.PodUID}
	}
	c.reviews[tok] = authenticationv1.TokenReviewStatus{
		Authenticated: true, Audiences: t.Audiences,
		User: authenticationv1.UserInfo{Username: "system:serviceaccount:" + t.Namespace + ":" + t.ServiceAccount, Extra: extra},
	}
	return tok
}

// Reviews is how many TokenReviews were created.
func (c *Cluster) Reviews() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created
}

// ServiceAccount is the service account of the pods Pod returns.
const ServiceAccount = "meshperf-agent"

// OwnerUID is the UID of the controller named owner in the pods Pod
// returns, and of the DaemonSet of that name DaemonSet returns.
func OwnerUID(owner string) types.UID { return types.UID("uid-ds-" + owner) }

// Pod returns a running pod named name with uid in ns, of service account
// ServiceAccount, scheduled to node, whose controller is the apps/v1
// ownerKind named owner with OwnerUID(owner) (none if owner is empty).
func Pod(ns, name, uid, node, ownerKind, owner string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: node, ServiceAccountName: ServiceAccount},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: ownerKind, Name: owner, UID: OwnerUID(owner), Controller: ptr.To(true)}}
	}
	return p
}

// DaemonSet returns the DaemonSet named name in ns, of UID OwnerUID(name).
func DaemonSet(ns, name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: OwnerUID(name)}}
}
