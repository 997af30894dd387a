package identity_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshperf/meshperf/coordinator/identity"
	"github.com/meshperf/meshperf/coordinator/kube"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/identitytest"
)

const (
	ns = "meshperf"
	ds = identity.DefaultDaemonSet
	sa = "meshperf-agent"
)

// withToken is a stream context carrying the metadata values toks.
func withToken(toks ...string) context.Context {
	md := metadata.MD{}
	for _, t := range toks {
		md.Append(identity.MetadataKey, t)
	}
	return metadata.NewIncomingContext(context.Background(), md)
}

// TestToken: a projected token proves the node of its pod, if the pod is
// the token's (same uid), of the agent DaemonSet, and scheduled; anything
// else is refused with the reason, and an API failure is ErrUnavailable.
func TestToken(t *testing.T) {
	forgedOwner := identitytest.Pod(ns, "forged-owner", "uid-f", "node-b", "DaemonSet", ds)
	forgedOwner.OwnerReferences[0].UID = "uid-made-up"
	otherSA := identitytest.Pod(ns, "other-sa", "uid-s", "node-b", "DaemonSet", ds)
	otherSA.Spec.ServiceAccountName = "default"
	notRunning := identitytest.Pod(ns, "succeeded", "uid-n", "node-b", "DaemonSet", ds)
	notRunning.Status.Phase = corev1.PodSucceeded
	deleting := identitytest.Pod(ns, "deleting", "uid-d", "node-b", "DaemonSet", ds)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	cl := identitytest.New(fake.NewClientset(
		identitytest.DaemonSet(ns, ds),
		forgedOwner, otherSA, notRunning, deleting,
		identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds),
		identitytest.Pod(ns, "agent-b", "uid-b", "node-b", "DaemonSet", ds),
		identitytest.Pod(ns, "impostor", "uid-i", "node-b", "DaemonSet", "other"),
		identitytest.Pod(ns, "rs-pod", "uid-r", "node-b", "ReplicaSet", ds),
		identitytest.Pod(ns, "orphan", "uid-o", "node-b", "", ""),
		identitytest.Pod(ns, "pending", "uid-p", "", "DaemonSet", ds),
		identitytest.Pod("default", "agent-x", "uid-x", "node-b", "DaemonSet", ds),
	))
	exp := time.Now().Add(time.Hour)
	issueAs := func(ns, sa, pod, uid string, aud ...string) string {
		if len(aud) == 0 {
			aud = []string{identity.Audience}
		}
		return cl.Issue(identitytest.Token{Namespace: ns, ServiceAccount: sa, Pod: pod, PodUID: uid, Audiences: aud, Expires: exp})
	}
	issue := func(ns, pod, uid string, aud ...string) string { return issueAs(ns, sa, pod, uid, aud...) }
	v, err := identity.NewToken(identity.TokenConfig{Client: cl.Clientset, Namespace: ns, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	forged := jwt(`{"aud":["meshperf"],"exp":4102444800}`)
	tests := []struct {
		name     string
		ctx      context.Context
		wantNode string
		wantErr  error
		wantIn   string
	}{
		{"agent pod on node-a", withToken(issue(ns, "agent-a", "uid-a")), "node-a", nil, ""},
		{"agent pod on node-b", withToken(issue(ns, "agent-b", "uid-b")), "node-b", nil, ""},
		{"pod of another DaemonSet", withToken(issue(ns, "impostor", "uid-i")), "", identity.ErrRefused, "not of the agent DaemonSet meshperf-agent (its controller: apps/v1 DaemonSet/other)"},
		{"pod of a ReplicaSet of the same name", withToken(issue(ns, "rs-pod", "uid-r")), "", identity.ErrRefused, "its controller: apps/v1 ReplicaSet/meshperf-agent"},
		{"pod without controller", withToken(issue(ns, "orphan", "uid-o")), "", identity.ErrRefused, "its controller: none"},
		{"pod naming the DaemonSet with a made-up uid", withToken(issue(ns, "forged-owner", "uid-f")), "", identity.ErrRefused, `controller reference has uid "uid-made-up"`},
		{"pod of another service account", withToken(issue(ns, "other-sa", "uid-s")), "", identity.ErrRefused, `runs as service account "default"`},
		{"token of another service account", withToken(issueAs(ns, "default", "other-sa", "uid-s")), "", identity.ErrRefused, `not of the agents' service account "meshperf-agent"`},
		{"pod not running", withToken(issue(ns, "succeeded", "uid-n")), "", identity.ErrRefused, `in phase "Succeeded"`},
		{"pod being deleted", withToken(issue(ns, "deleting", "uid-d")), "", identity.ErrRefused, "being deleted"},
		{"pod not scheduled", withToken(issue(ns, "pending", "uid-p")), "", identity.ErrRefused, "not scheduled"},
		{"pod replaced (another uid)", withToken(issue(ns, "agent-a", "uid-old")), "", identity.ErrRefused, "a pod of the same name replaced it"},
		{"pod gone", withToken(issue(ns, "agent-gone", "uid-g")), "", identity.ErrRefused, "does not exist"},
		{"token of another namespace", withToken(issue("default", "agent-x", "uid-x")), "", identity.ErrRefused, `not the agents' "meshperf"`},
		{"token bound to no pod", withToken(issue(ns, "", "")), "", identity.ErrRefused, "bound to no pod"},
		{"token for the API server", withToken(issue(ns, "agent-a", "uid-a", "https://kubernetes.default.svc")), "", identity.ErrRefused, `lack "meshperf"`},
		{"forged token", withToken(forged), "", identity.ErrRefused, "invalid bearer token"},
		{"not a JWT", withToken("eyJ.forged.x"), "", identity.ErrRefused, "part 3 is not base64url"},
		{"no token", context.Background(), "", identity.ErrNoProof, "no identity token"},
		{"empty token", withToken(" "), "", identity.ErrNoProof, "empty"},
		{"two tokens", withToken(issue(ns, "agent-a", "uid-a"), issue(ns, "agent-b", "uid-b")), "", identity.ErrRefused, "2 values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := v.Verify(tt.ctx)
			if node != tt.wantNode || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Verify = %q, %v; want %q, %v", node, err, tt.wantNode, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Verify: %v, want %q in it", err, tt.wantIn)
			}
		})
	}
}

// jwt is a JWT-shaped token of payload, signed by no one.
func jwt(payload string) string {
	return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".Zm9yZ2Vk"
}

// TestTokenPrecheck: a token that is not a JWT, not for the meshperf
// audience or expired by its own claims is refused before any API call,
// so a flood of made-up tokens takes no TokenReview slot; a well-formed
// one is reviewed.
func TestTokenPrecheck(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		tok        string
		wantIn     string
		wantReview bool
	}{
		{"one part", "garbage", "1 dot-separated parts", false},
		{"four parts", "a.b.c.d", "4 dot-separated parts", false},
		{"empty part", "eyJhbGciOiJSUzI1NiJ9..Zm9yZ2Vk", "part 2 is not base64url", false},
		{"not base64url", "eyJ.!!.x", "part 2 is not base64url", false},
		{"payload not JSON", jwt("not json"), "not a JSON object", false},
		{"payload a JSON array", jwt(`["meshperf"]`), "not a JSON object", false},
		{"no audience", jwt(`{"exp":4102444800}`), `lack "meshperf"`, false},
		{"another audience", jwt(`{"aud":["https://kubernetes.default.svc"],"exp":4102444800}`), `lack "meshperf"`, false},
		{"expired", jwt(`{"aud":["meshperf"],"exp":1764590400}`), "expired at 2025-12-01T12:00:00Z", false},
		{"audience as a string", jwt(`{"aud":"meshperf","exp":4102444800}`), "invalid bearer token", true},
		{"well-formed", jwt(`{"aud":["x","meshperf"],"exp":4102444800}`), "invalid bearer token", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := identitytest.New(fake.NewClientset())
			v, err := identity.NewToken(identity.TokenConfig{Client: cl.Clientset, Namespace: ns, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(withToken(tt.tok))
			if !errors.Is(err, identity.ErrRefused) || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Verify: %v, want ErrRefused with %q", err, tt.wantIn)
			}
			if got := cl.Reviews() > 0; got != tt.wantReview {
				t.Errorf("TokenReview made: %v, want %v", got, tt.wantReview)
			}
		})
	}
}

// TestTokenDaemonSetUID: the agent DaemonSet's UID is read from the API
// and kept; a DaemonSet that is gone, or an API failure reading it,
// refuses or defers the token.
func TestTokenDaemonSetUID(t *testing.T) {
	tests := []struct {
		name    string
		objs    []runtime.Object
		fail    bool
		wantErr error
		wantIn  string
	}{
		{"DaemonSet present", []runtime.Object{identitytest.DaemonSet(ns, ds)}, false, nil, ""},
		{"DaemonSet gone", nil, false, identity.ErrRefused, "DaemonSet meshperf/meshperf-agent does not exist"},
		{"DaemonSet recreated", []runtime.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: ds, Namespace: ns, UID: "uid-new"}}}, false, identity.ErrRefused, `has uid "uid-new"`},
		{"get daemonset fails", []runtime.Object{identitytest.DaemonSet(ns, ds)}, true, identity.ErrUnavailable, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(append(tt.objs, identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds))...)
			if tt.fail {
				c.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			}
			cl := identitytest.New(c)
			v, err := identity.NewToken(identity.TokenConfig{Client: c, Namespace: ns, CacheTTL: -1})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				tok := cl.Issue(identitytest.Token{Namespace: ns, ServiceAccount: sa, Pod: "agent-a", PodUID: "uid-a",
					Audiences: []string{identity.Audience}, Expires: time.Now().Add(time.Hour)})
				node, err := v.Verify(withToken(tok))
				if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) || err != nil && !strings.Contains(err.Error(), tt.wantIn) {
					t.Fatalf("Verify %d = %q, %v; want %v with %q", i, node, err, tt.wantErr, tt.wantIn)
				}
			}
			gets := 0
			for _, a := range c.Actions() {
				if a.GetVerb() == "get" && a.GetResource().Resource == "daemonsets" {
					gets++
				}
			}
			if tt.wantErr == nil && gets != 1 {
				t.Errorf("%d gets of the DaemonSet for two tokens, want 1 (its UID kept)", gets)
			}
		})
	}
}

// TestTokenAPIDown: an API server that fails is ErrUnavailable (try again),
// not a refusal.
func TestTokenAPIDown(t *testing.T) {
	for _, tt := range []struct{ name, verb, resource string }{
		{"TokenReview fails", "create", "tokenreviews"},
		{"get pod fails", "get", "pods"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(identitytest.DaemonSet(ns, ds), identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds))
			cl := identitytest.New(c)
			c.PrependReactor(tt.verb, tt.resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			})
			tok := cl.Issue(identitytest.Token{Namespace: ns, ServiceAccount: sa, Pod: "agent-a", PodUID: "uid-a",
				Audiences: []string{identity.Audience}, Expires: time.Now().Add(time.Hour)})
			v, err := identity.NewToken(identity.TokenConfig{Client: c, Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			if node, err := v.Verify(withToken(tok)); !errors.Is(err, identity.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
				t.Fatalf("Verify = %q, %v; want ErrUnavailable with the API's error", node, err)
			}
		})
	}
}

// TestTokenCache: a positive verdict is kept for CacheTTL, never past the
// token's expiry (then the expired token is refused with no review); a
// refusal is never kept.
func TestTokenCache(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		expires time.Time     // the token's exp
		forged  bool          // a token the API refuses
		after   time.Duration // the second Verify this long after the first
		want    int           // TokenReviews made by the two
	}{
		{"again at once", start.Add(time.Hour), false, 0, 1},
		{"again within the TTL", start.Add(time.Hour), false, time.Minute, 1},
		{"again after the TTL", start.Add(time.Hour), false, 2*time.Minute + time.Second, 2},
		{"again after the token expired, within the TTL", start.Add(30 * time.Second), false, 31 * time.Second, 1},
		{"a refusal again at once", start.Add(time.Hour), true, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := identitytest.New(fake.NewClientset(identitytest.DaemonSet(ns, ds), identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds)))
			tok := jwt(`{"aud":["meshperf"],"exp":4102444800}`)
			if !tt.forged {
				tok = cl.Issue(identitytest.Token{Namespace: ns, ServiceAccount: sa, Pod: "agent-a", PodUID: "uid-a",
					Audiences: []string{identity.Audience}, Expires: tt.expires})
			}
			clock := testutil.NewClock(start)
			v, err := identity.NewToken(identity.TokenConfig{Client: cl.Clientset, Namespace: ns, CacheTTL: 2 * time.Minute, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				node, err := v.Verify(withToken(tok))
				expired := !clock.Now().Before(tt.expires)
				if refused := tt.forged || expired; refused != (err != nil) || !refused && node != "node-a" {
					t.Fatalf("Verify %d = %q, %v", i, node, err)
				}
				clock.Add(tt.after)
			}
			if got := cl.Reviews(); got != tt.want {
				t.Errorf("%d TokenReviews, want %d", got, tt.want)
			}
		})
	}
}

// TestNewTokenConfig: the client and the namespace are required.
func TestNewTokenConfig(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cfg    identity.TokenConfig
		wantIn string
	}{
		{"no client", identity.TokenConfig{Namespace: ns}, "Client"},
		{"no namespace", identity.TokenConfig{Client: fake.NewClientset()}, "Namespace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := identity.NewToken(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("NewToken: %v, want an error naming %s", err, tt.wantIn)
			}
		})
	}
}

// TestTokenMaxReviews: with MaxReviews reviews in progress, another waits
// for a slot, and gives up as ErrUnavailable when its context ends first.
func TestTokenMaxReviews(t *testing.T) {
	c := fake.NewClientset(identitytest.DaemonSet(ns, ds), identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds))
	cl := identitytest.New(c)
	issue := func() string {
		return cl.Issue(identitytest.Token{Namespace: ns, ServiceAccount: sa, Pod: "agent-a", PodUID: "uid-a",
			Audiences: []string{identity.Audience}, Expires: time.Now().Add(time.Hour)})
	}
	slow, fast := issue(), issue()
	entered, gate := make(chan struct{}), make(chan struct{})
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).Spec.Token == slow {
			close(entered)
			<-gate
		}
		return false, nil, nil // the next reactor answers
	})
	v, err := identity.NewToken(identity.TokenConfig{Client: c, Namespace: ns, MaxReviews: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := v.Verify(withToken(slow)); done <- err }()
	<-entered // the one slot is taken
	ctx, cancel := context.WithCancel(withToken(fast))
	cancel()
	if node, err := v.Verify(ctx); !errors.Is(err, identity.ErrUnavailable) || !strings.Contains(err.Error(), "1 token reviews in progress") {
		t.Errorf("Verify with every slot taken = %q, %v; want ErrUnavailable", node, err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Errorf("the slow review: %v", err)
	}
	if node, err := v.Verify(withToken(fast)); err != nil || node != "node-a" {
		t.Errorf("Verify after the slot is free = %q, %v", node, err)
	}
}

// TestTokenPodCache: with a cache of the agent pods (kube.AgentPods on
// the same API), a token whose pod the cache holds, running, costs a
// TokenReview and no pod read; a cache that lags (a miss, a pod it still
// shows pending or being deleted, a pod of the same name it holds with an
// older UID) falls back to reading the pod, so it never refuses an agent
// the API would let in, nor lets in one the API would refuse.
func TestTokenPodCache(t *testing.T) {
	agent := func(name, uid string) *corev1.Pod {
		p := identitytest.Pod(ns, name, uid, "node-"+name, "DaemonSet", ds)
		p.Labels = map[string]string{"app.kubernetes.io/name": "meshperf-agent"}
		return p
	}
	c := fake.NewClientset(identitytest.DaemonSet(ns, ds), agent("a", "uid-a"), agent("b", "uid-b"), agent("c", "uid-c"), agent("d", "uid-d"))
	cl := identitytest.New(c)
	pods, err := kube.NewAgentPods(t.Context(), kube.AgentPodsConfig{Client: c, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, time.Millisecond, "the agent pods in the cache", func() bool {
		_, ok := pods.Get("d")
		return ok
	})
	pending := agent("b", "uid-b")
	pending.Status.Phase = corev1.PodPending
	deleting := agent("c", "uid-c")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	// What a lagging cache shows: b still pending, c being deleted (the API
	// has it running again: a cache that lies), d an older pod of the name.
	lagging := map[string]*corev1.Pod{"b": pending, "c": deleting, "d": agent("d", "uid-d-old")}
	cache := func(name string) (*corev1.Pod, bool) {
		if p, ok := lagging[name]; ok {
			return p, true
		}
		return pods.Get(name)
	}
	v, err := identity.NewToken(identity.TokenConfig{Client: c, Namespace: ns, CacheTTL: -1, Pods: cache})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		pod, uid, wantNode string
		wantErr            error
		wantGets           int
	}{
		{"a", "uid-a", "node-a", nil, 0},                  // cached and running
		{"b", "uid-b", "node-b", nil, 1},                  // cached pending: read
		{"c", "uid-c", "node-c", nil, 1},                  // cached being deleted: read
		{"d", "uid-d", "node-d", nil, 1},                  // cached with an older UID: read
		{"e", "uid-e", "", identity.ErrRefused, 1},        // no such pod: read, refused
		{"a", "uid-a-forged", "", identity.ErrRefused, 1}, // the cache's pod has another UID: read, refused
	} {
		c.ClearActions()
		tok := cl.Issue(identitytest.Token{Namespace: ns, ServiceAccount: sa, Pod: tt.pod, PodUID: tt.uid,
			Audiences: []string{identity.Audience}, Expires: time.Now().Add(time.Hour)})
		node, err := v.Verify(withToken(tok))
		if node != tt.wantNode || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
			t.Errorf("pod %s uid %s: Verify = %q, %v; want %q, %v", tt.pod, tt.uid, node, err, tt.wantNode, tt.wantErr)
		}
		gets := 0
		for _, a := range c.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
				gets++
			}
		}
		if gets != tt.wantGets {
			t.Errorf("pod %s uid %s: %d pod reads, want %d", tt.pod, tt.uid, gets, tt.wantGets)
		}
	}
}
