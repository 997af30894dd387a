package identity_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshperf/meshperf/coordinator/identity"
	"github.com/meshperf/meshperf/coordinator/identity/identitytest"
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
	cl := identitytest.New(fake.NewClientset(
		identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds),
		identitytest.Pod(ns, "agent-b", "uid-b", "node-b", "DaemonSet", ds),
		identitytest.Pod(ns, "impostor", "uid-i", "node-b", "DaemonSet", "other"),
		identitytest.Pod(ns, "rs-pod", "uid-r", "node-b", "ReplicaSet", ds),
		identitytest.Pod(ns, "orphan", "uid-o", "node-b", "", ""),
		identitytest.Pod(ns, "pending", "uid-p", "", "DaemonSet", ds),
		identitytest.Pod("default", "agent-x", "uid-x", "node-b", "DaemonSet", ds),
	))
	exp := time.Now().Add(time.Hour)
	issue := func(ns, pod, uid string, aud ...string) string {
		if len(aud) == 0 {
			aud = []string{identity.Audience}
		}
		return cl.Issue(identitytest.Token{Namespace: ns, ServiceAccount: sa, Pod: pod, PodUID: uid, Audiences: aud, Expires: exp})
	}
	v, err := identity.NewToken(identity.TokenConfig{Client: cl.Clientset, Namespace: ns, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
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
		{"pod not scheduled", withToken(issue(ns, "pending", "uid-p")), "", identity.ErrRefused, "not scheduled"},
		{"pod replaced (another uid)", withToken(issue(ns, "agent-a", "uid-old")), "", identity.ErrRefused, "a pod of the same name replaced it"},
		{"pod gone", withToken(issue(ns, "agent-gone", "uid-g")), "", identity.ErrRefused, "does not exist"},
		{"token of another namespace", withToken(issue("default", "agent-x", "uid-x")), "", identity.ErrRefused, `not the agents' "meshperf"`},
		{"token bound to no pod", withToken(issue(ns, "", "")), "", identity.ErrRefused, "bound to no pod"},
		{"token for the API server", withToken(issue(ns, "agent-a", "uid-a", "https://kubernetes.default.svc")), "", identity.ErrRefused, "audiences do not match"},
		{"forged token", withToken("eyJ.forged.x"), "", identity.ErrRefused, "invalid bearer token"},
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

// TestTokenAPIDown: an API server that fails is ErrUnavailable (try again),
// not a refusal.
func TestTokenAPIDown(t *testing.T) {
	for _, tt := range []struct{ name, verb, resource string }{
		{"TokenReview fails", "create", "tokenreviews"},
		{"get pod fails", "get", "pods"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds))
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

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestTokenCache: a positive verdict is kept for CacheTTL, never past the
// token's expiry; a refusal is never kept.
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
		{"again after the token expired, within the TTL", start.Add(30 * time.Second), false, 31 * time.Second, 2},
		{"a refusal again at once", start.Add(time.Hour), true, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := identitytest.New(fake.NewClientset(identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds)))
			tok := "forged"
			if !tt.forged {
				tok = cl.Issue(identitytest.Token{Namespace: ns, ServiceAccount: sa, Pod: "agent-a", PodUID: "uid-a",
					Audiences: []string{identity.Audience}, Expires: tt.expires})
			}
			clock := &fakeClock{now: start}
			v, err := identity.NewToken(identity.TokenConfig{Client: cl.Clientset, Namespace: ns, CacheTTL: 2 * time.Minute, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				node, err := v.Verify(withToken(tok))
				if tt.forged != (err != nil) || !tt.forged && node != "node-a" {
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
	c := fake.NewClientset(identitytest.Pod(ns, "agent-a", "uid-a", "node-a", "DaemonSet", ds))
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
