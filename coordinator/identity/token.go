package identity

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The user extra of a TokenReview of a pod-bound service-account token.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// DefaultDaemonSet is the agent DaemonSet of deploy/kubernetes.
const DefaultDaemonSet = "meshperf-agent"

// DefaultServiceAccount is the agent DaemonSet's service account in
// deploy/kubernetes.
const DefaultServiceAccount = "meshperf-agent"

// daemonSetTTL bounds how long Token keeps the agent DaemonSet's UID.
const daemonSetTTL = 30 * time.Second

// DefaultCacheTTL bounds how long Token keeps a positive verdict.
const DefaultCacheTTL = 2 * time.Minute

// maxCached bounds Token's cache: beyond it, verdicts are not cached.
const maxCached = 100_000

// apiTimeout bounds each call to the API server.
const apiTimeout = 10 * time.Second

// DefaultMaxReviews bounds the concurrent reviews when
// TokenConfig.MaxReviews is zero: a flood of made-up tokens (never cached)
// costs the API server that many calls at a time, not one per session.
const DefaultMaxReviews = 16

// TokenConfig configures NewToken.
type TokenConfig struct {
	// Client talks to the API server; required. It needs create on
	// authentication.k8s.io tokenreviews (cluster-scoped), get on pods
	// and get on apps daemonsets in Namespace.
	Client kubernetes.Interface
	// Namespace is the agent DaemonSet's; required.
	Namespace string
	// DaemonSet is the agent DaemonSet's name; empty means
	// DefaultDaemonSet.
	DaemonSet string
	// ServiceAccount is the agent pods' service account, the one their
	// tokens name; empty means DefaultServiceAccount.
	ServiceAccount string
	// Audience is the token's required audience; empty means Audience.
	Audience string
	// CacheTTL bounds how long a positive verdict is kept (never past the
	// token's own expiry); zero means DefaultCacheTTL, negative no cache.
	CacheTTL time.Duration
	// MaxReviews bounds the reviews in progress at once (a TokenReview
	// and a pod get each); more wait. Zero means DefaultMaxReviews.
	MaxReviews int
	// Pods, if set, is a cache of the agent pods of Namespace
	// (coordinator/kube.AgentPods.Get) read before the API: a cached pod
	// with the UID the TokenReview gave, running and not being deleted,
	// is checked as if read from the API, so that a fleet reconnecting
	// after a coordinator restart costs a TokenReview per agent and no
	// pod read. Anything else (a miss, another UID, a pod the cache still
	// shows pending) is read from the API, so a cache that lags never
	// refuses an agent; kube.AgentPods answers nothing while its watch
	// fails, so it lags a watch event at most. The pod is not modified.
	// Nil means every pod is read from the API.
	Pods func(name string) (*corev1.Pod, bool)
	// Now is the cache's clock; nil means time.Now.
	Now func() time.Time
	// Logger receives a debug line per review; nil means discard.
	Logger *slog.Logger
}

// Token proves a node from the agent's projected service-account token
// (metadata MetadataKey): the TokenReview API must authenticate it for
// Audience as a service account of Namespace bound to a pod; that pod,
// read from the API (or TokenConfig.Pods), must have the reviewed UID, be
// controlled by the
// DaemonSet (the controller reference's UID is the live DaemonSet's), run
// as ServiceAccount, be running and not being deleted, and run on a node
// (spec.nodeName), which is the node proven. A token that is not a
// well-formed JWT for Audience, or is expired by its own (unverified)
// claims, is refused before any API call.
// Positive verdicts are cached per token for CacheTTL, so that agents
// reconnecting cost no API calls; refusals are not. Safe for concurrent
// use.
type Token struct {
	cfg     TokenConfig
	log     *slog.Logger
	reviews chan struct{} // semaphore of MaxReviews

	mu    sync.Mutex
	cache map[[sha256.Size]byte]verdict
	dsUID string    // the DaemonSet's UID, read at dsAt
	dsAt  time.Time // zero: not read
}

// verdict is a cached positive verdict.
type verdict struct {
	node    string
	expires time.Time
}

// NewToken returns a Token verifier for cfg.
func NewToken(cfg TokenConfig) (*Token, error) {
	if cfg.Client == nil {
		return nil, errors.New("identity: TokenConfig.Client is nil")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("identity: TokenConfig.Namespace is empty")
	}
	if cfg.DaemonSet == "" {
		cfg.DaemonSet = DefaultDaemonSet
	}
	if cfg.Audience == "" {
		cfg.Audience = Audience
	}
	if cfg.ServiceAccount == "" {
		cfg.ServiceAccount = DefaultServiceAccount
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxReviews <= 0 {
		cfg.MaxReviews = DefaultMaxReviews
	}
	t := &Token{cfg: cfg, log: cfg.Logger, cache: map[[sha256.Size]byte]verdict{}, reviews: make(chan struct{}, cfg.MaxReviews)}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	return t, nil
}

// Verify implements Verifier.
func (t *Token) Verify(ctx context.Context) (string, error) {
	vals := metadata.ValueFromIncomingContext(ctx, MetadataKey)
	switch {
	case len(vals) == 0:
		return "", fmt.Errorf("%w: no identity token (metadata %s; agent flag --identity-token-file)", ErrNoProof, MetadataKey)
	case len(vals) > 1:
		return "", fmt.Errorf("%w: %d values of metadata %s, want one", ErrRefused, len(vals), MetadataKey)
	}
	tok := strings.TrimSpace(vals[0])
	if tok == "" {
		return "", fmt.Errorf("%w: metadata %s is empty", ErrNoProof, MetadataKey)
	}
	key := sha256.Sum256([]byte(tok))
	now := t.cfg.Now()
	if node, ok := t.cached(key, now); ok {
		return node, nil
	}
	if err := precheck(tok, t.cfg.Audience, now); err != nil {
		return "", err
	}
	node, err := t.review(ctx, tok)
	if err != nil {
		return "", err
	}
	t.remember(key, node, now, tokenExpiry(tok))
	return node, nil
}

func (t *Token) cached(key [sha256.Size]byte, now time.Time) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.cache[key]
	if !ok {
		return "", false
	}
	if !now.Before(v.expires) {
		delete(t.cache, key)
		return "", false
	}
	return v.node, true
}

// remember caches a positive verdict until CacheTTL from now or the
// token's expiry (zero: unknown), whichever comes first.
func (t *Token) remember(key [sha256.Size]byte, node string, now, exp time.Time) {
	if t.cfg.CacheTTL < 0 {
		return
	}
	until := now.Add(t.cfg.CacheTTL)
	if !exp.IsZero() && exp.Before(until) {
		until = exp
	}
	if !now.Before(until) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.cache) >= maxCached {
		for k, v := range t.cache {
			if !now.Before(v.expires) {
				delete(t.cache, k)
			}
		}
		if len(t.cache) >= maxCached {
			return
		}
	}
	t.cache[key] = verdict{node: node, expires: until}
}

// review checks tok with the TokenReview API and the pod it is bound to.
func (t *Token) review(ctx context.Context, tok string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	select {
	case t.reviews <- struct{}{}:
		defer func() { <-t.reviews }()
	case <-ctx.Done():
		return "", fmt.Errorf("%w: %d token reviews in progress: %w", ErrUnavailable, t.cfg.MaxReviews, ctx.Err())
	}
	tr, err := t.cfg.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: []string{t.cfg.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("%w: TokenReview: %w", ErrUnavailable, err)
	}
	st := tr.Status
	if !st.Authenticated {
		why := st.Error
		if why == "" {
			why = "not authenticated"
		}
		return "", fmt.Errorf("%w: TokenReview: %s", ErrRefused, why)
	}
	if !slices.Contains(st.Audiences, t.cfg.Audience) {
		return "", fmt.Errorf("%w: TokenReview: token audiences %q lack %q", ErrRefused, st.Audiences, t.cfg.Audience)
	}
	user := st.User.Username
	ns, sa, ok := serviceAccount(user)
	if !ok {
		return "", fmt.Errorf("%w: token user %q is not a service account", ErrRefused, user)
	}
	if sa != t.cfg.ServiceAccount {
		return "", fmt.Errorf("%w: token user %q is not of the agents' service account %q", ErrRefused, user, t.cfg.ServiceAccount)
	}
	if ns != t.cfg.Namespace {
		return "", fmt.Errorf("%w: token user %q is of namespace %q, not the agents' %q", ErrRefused, user, ns, t.cfg.Namespace)
	}
	podName, podUID := one(st.User.Extra[extraPodName]), one(st.User.Extra[extraPodUID])
	if podName == "" || podUID == "" {
		return "", fmt.Errorf("%w: token of %q is bound to no pod (user extra %s %q, %s %q): want a projected token",
			ErrRefused, user, extraPodName, st.User.Extra[extraPodName], extraPodUID, st.User.Extra[extraPodUID])
	}
	pod, err := t.pod(ctx, ns, podName, podUID)
	if err != nil {
		return "", err
	}
	if string(pod.UID) != podUID {
		return "", fmt.Errorf("%w: pod %s/%s has uid %q, the token's is %q (a pod of the same name replaced it)", ErrRefused, ns, podName, pod.UID, podUID)
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "DaemonSet" || owner.Name != t.cfg.DaemonSet || !strings.HasPrefix(owner.APIVersion, "apps/") {
		got := "none"
		if owner != nil {
			got = fmt.Sprintf("%s %s/%s", owner.APIVersion, owner.Kind, owner.Name)
		}
		return "", fmt.Errorf("%w: pod %s/%s is not of the agent DaemonSet %s (its controller: %s)", ErrRefused, ns, podName, t.cfg.DaemonSet, got)
	}
	if err := t.checkDaemonSet(ctx, string(owner.UID)); err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", ns, podName, err)
	}
	if pod.Spec.ServiceAccountName != sa {
		return "", fmt.Errorf("%w: pod %s/%s runs as service account %q, the token's is %q", ErrRefused, ns, podName, pod.Spec.ServiceAccountName, sa)
	}
	if pod.DeletionTimestamp != nil {
		return "", fmt.Errorf("%w: pod %s/%s is being deleted (deletionTimestamp %s)", ErrRefused, ns, podName, pod.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	if pod.Status.Phase != corev1.PodRunning {
		return "", fmt.Errorf("%w: pod %s/%s is in phase %q, not %q", ErrRefused, ns, podName, pod.Status.Phase, corev1.PodRunning)
	}
	if pod.Spec.NodeName == "" {
		return "", fmt.Errorf("%w: pod %s/%s is not scheduled to a node", ErrRefused, ns, podName)
	}
	t.log.Debug("identity token reviewed", "service_account", sa, "pod", podName, "node", pod.Spec.NodeName)
	return pod.Spec.NodeName, nil
}

// pod returns the token's pod: from TokenConfig.Pods if it holds the pod
// with uid, running and not being deleted, else from the API. The
// TokenReview has just shown that the pod exists; its UID, controller,
// service account and node never change, and what a cache may lag on, a
// pod that has since finished or is being deleted, is a pod the review
// would refuse moments later.
func (t *Token) pod(ctx context.Context, ns, name, uid string) (*corev1.Pod, error) {
	if t.cfg.Pods != nil && ns == t.cfg.Namespace {
		if pod, ok := t.cfg.Pods(name); ok && string(pod.UID) == uid && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
			return pod, nil
		}
	}
	pod, err := t.cfg.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: token's pod %s/%s does not exist", ErrRefused, ns, name)
	case err != nil:
		return nil, fmt.Errorf("%w: get pod %s/%s: %w", ErrUnavailable, ns, name, err)
	}
	return pod, nil
}

// checkDaemonSet checks that uid, a pod's controller reference, is the
// live agent DaemonSet's: a pod that names the DaemonSet in an owner
// reference of its own making has another UID. The UID is read from the
// API and kept for daemonSetTTL; a kept one that differs is read again
// (the DaemonSet may have been recreated).
func (t *Token) checkDaemonSet(ctx context.Context, uid string) error {
	now := t.cfg.Now()
	t.mu.Lock()
	kept, at := t.dsUID, t.dsAt
	t.mu.Unlock()
	if !at.IsZero() && now.Sub(at) < daemonSetTTL && now.Sub(at) >= 0 && kept == uid {
		return nil
	}
	ds, err := t.cfg.Client.AppsV1().DaemonSets(t.cfg.Namespace).Get(ctx, t.cfg.DaemonSet, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: the agent DaemonSet %s/%s does not exist", ErrRefused, t.cfg.Namespace, t.cfg.DaemonSet)
	case err != nil:
		return fmt.Errorf("%w: get daemonset %s/%s: %w", ErrUnavailable, t.cfg.Namespace, t.cfg.DaemonSet, err)
	}
	t.mu.Lock()
	t.dsUID, t.dsAt = string(ds.UID), now
	t.mu.Unlock()
	if string(ds.UID) != uid {
		return fmt.Errorf("%w: its controller reference has uid %q, the agent DaemonSet %s/%s has uid %q (not made by the DaemonSet)",
			ErrRefused, uid, t.cfg.Namespace, t.cfg.DaemonSet, ds.UID)
	}
	return nil
}

// precheck refuses, with no API call, a token that is not a well-formed
// JWT (three base64url parts, a JSON payload), whose payload lacks the
// audience aud, or that has expired by its exp claim. Its claims are
// unverified: it only sorts out garbage before the TokenReview, which
// stays the real check.
func precheck(tok, aud string, now time.Time) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return fmt.Errorf("%w: identity token is not a JWT (%d dot-separated parts, want 3)", ErrRefused, len(parts))
	}
	for i, p := range parts {
		if _, err := base64.RawURLEncoding.DecodeString(p); p == "" || err != nil {
			return fmt.Errorf("%w: identity token is not a JWT (part %d is not base64url)", ErrRefused, i+1)
		}
	}
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Aud json.RawMessage `json:"aud"`
		Exp *float64        `json:"exp"`
	}
	if err := json.Unmarshal(b, &claims); err != nil {
		return fmt.Errorf("%w: identity token's payload is not a JSON object: %w", ErrRefused, err)
	}
	var auds []string
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		auds = []string{one}
	} else if json.Unmarshal(claims.Aud, &auds) != nil {
		auds = nil
	}
	if !slices.Contains(auds, aud) {
		return fmt.Errorf("%w: identity token's audiences %q lack %q", ErrRefused, auds, aud)
	}
	if claims.Exp != nil && !now.Before(time.Unix(int64(*claims.Exp), 0)) {
		return fmt.Errorf("%w: identity token expired at %s", ErrRefused, time.Unix(int64(*claims.Exp), 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// serviceAccount splits "system:serviceaccount:NS:NAME".
func serviceAccount(user string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	return ns, name, ok && ns != "" && name != "" && !strings.Contains(name, ":")
}

// one is the single value of an extra, or "" if it has none or several.
func one(v authenticationv1.ExtraValue) string {
	if len(v) != 1 {
		return ""
	}
	return v[0]
}

// tokenExpiry reads the exp claim of a JWT that the TokenReview API has
// just authenticated (so its claims are the API server's); zero if it has
// none or is not a JWT.
func tokenExpiry(tok string) time.Time {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(b, &claims) != nil || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(claims.Exp, 0)
}
