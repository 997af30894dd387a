package kubernetes

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// manifests is every file under deploy/kubernetes, decoded.
type manifests struct {
	// objects are the Kubernetes objects, in file order.
	objects []object
	// kustomizations are the kustomization.yaml files by directory ("." for
	// deploy/kubernetes itself).
	kustomizations map[string]*kustomization
	// patches are the JSON patch files by path.
	patches map[string][]jsonPatchOp
	// data are the files that a configMapGenerator reads, by path.
	data map[string][]byte
	// files are all YAML files, slash paths relative to deploy/kubernetes.
	files []string
	// rendered: the objects are one rendering (kustomize build, helm
	// template), not the source files: no kustomizations, patches, data or
	// files, and every patch applied.
	rendered bool
}

// object is one decoded YAML document and where it came from.
type object struct {
	file string
	obj  metav1.Object
}

// kinds maps apiVersion and kind to a new object of the type a document of
// that kind decodes into. A kind missing here is an error: add its type.
var kinds = map[string]func() metav1.Object{
	"v1/Namespace":                             func() metav1.Object { return &corev1.Namespace{} },
	"v1/ServiceAccount":                        func() metav1.Object { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":                             func() metav1.Object { return &corev1.ConfigMap{} },
	"v1/Service":                               func() metav1.Object { return &corev1.Service{} },
	"v1/PersistentVolumeClaim":                 func() metav1.Object { return &corev1.PersistentVolumeClaim{} },
	"apps/v1/Deployment":                       func() metav1.Object { return &appsv1.Deployment{} },
	"apps/v1/DaemonSet":                        func() metav1.Object { return &appsv1.DaemonSet{} },
	"rbac.authorization.k8s.io/v1/Role":        func() metav1.Object { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() metav1.Object { return &rbacv1.RoleBinding{} },
	"rbac.authorization.k8s.io/v1/ClusterRole": func() metav1.Object { return &rbacv1.ClusterRole{} },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() metav1.Object {
		return &rbacv1.ClusterRoleBinding{}
	},
	"networking.k8s.io/v1/NetworkPolicy":      func() metav1.Object { return &networkingv1.NetworkPolicy{} },
	"cert-manager.io/v1/Issuer":               func() metav1.Object { return &issuer{} },
	"cert-manager.io/v1/Certificate":          func() metav1.Object { return &certificate{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() metav1.Object { return &serviceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() metav1.Object { return &prometheusRule{} },
}

// clusterScoped are the kinds that have no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true}

// root is deploy/kubernetes: the tests run in it.
const root = "."

func load(t *testing.T) *manifests {
	t.Helper()
	m, err := loadManifests(root)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func loadManifests(dir string) (*manifests, error) {
	m := &manifests{kustomizations: map[string]*kustomization{}, patches: map[string][]jsonPatchOp{}, data: map[string][]byte{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return fs.SkipDir // test inputs (monitoring/testdata), no manifests
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			m.files = append(m.files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Kustomizations first: they say which files are patches and data.
	for _, f := range m.files {
		if path.Base(f) != "kustomization.yaml" {
			continue
		}
		k := &kustomization{}
		if err := decodeFile(f, k); err != nil {
			return nil, err
		}
		m.kustomizations[path.Dir(f)] = k
	}
	for _, f := range m.files {
		if path.Base(f) == "kustomization.yaml" {
			continue
		}
		role := m.role(f)
		switch role {
		case "patch":
			var ops []jsonPatchOp
			if err := decodeFile(f, &ops); err != nil {
				return nil, err
			}
			m.patches[f] = ops
		case "data":
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			m.data[f] = b
		default:
			objs, err := decodeObjects(f)
			if err != nil {
				return nil, err
			}
			m.objects = append(m.objects, objs...)
		}
	}
	return m, nil
}

// role says what the kustomization beside f uses it for: "patch", "data"
// (a generator's file) or "" (resources, or nothing).
func (m *manifests) role(f string) string {
	k := m.kustomizations[path.Dir(f)]
	if k == nil {
		return ""
	}
	name := path.Base(f)
	for _, p := range k.Patches {
		if p.Path == name {
			return "patch"
		}
	}
	for _, g := range k.ConfigMapGenerator {
		if slices.Contains(g.Files, name) {
			return "data"
		}
	}
	return ""
}

// decodeFile decodes a file that holds one YAML document strictly into v.
func decodeFile(f string, v any) error {
	b, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	if err := decodeStrict(b, v); err != nil {
		return fmt.Errorf("%s: %w", f, err)
	}
	return nil
}

// decodeObjects decodes every document of f into its Kubernetes type.
func decodeObjects(f string) ([]object, error) {
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, err
	}
	return decodeStream(f, b)
}

// decodeStream decodes every document of the YAML stream b, named f in
// errors and in each object's file, into its Kubernetes type.
func decodeStream(f string, b []byte) ([]object, error) {
	docs, err := documents(f, b)
	if err != nil {
		return nil, err
	}
	var out []object
	for _, d := range docs {
		newObj, ok := kinds[d.meta.APIVersion+"/"+d.meta.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: document %d: no Go type for apiVersion %q kind %q: add it to kinds", f, d.index, d.meta.APIVersion, d.meta.Kind)
		}
		obj := newObj()
		if err := decodeStrict(d.yaml, obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", f, d.index, d.meta.Kind, err)
		}
		out = append(out, object{file: f, obj: obj})
	}
	return out, nil
}

// find returns the object of type T named name, or the zero T.
func find[T metav1.Object](m *manifests, name string) T {
	for _, o := range m.objects {
		if v, ok := o.obj.(T); ok && o.obj.GetName() == name {
			return v
		}
	}
	var zero T
	return zero
}

// all returns every object of type T.
func all[T metav1.Object](m *manifests) []T {
	var out []T
	for _, o := range m.objects {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// kustomization is the part of kustomize's Kustomization that these
// manifests use; a field outside it fails the strict decoding (add it here
// if you mean it).
type kustomization struct {
	APIVersion         string               `json:"apiVersion"`
	Kind               string               `json:"kind"`
	Resources          []string             `json:"resources,omitempty"`
	Patches            []kustomizePatch     `json:"patches,omitempty"`
	ConfigMapGenerator []kustomizeGenerator `json:"configMapGenerator,omitempty"`
	Labels             []kustomizeLabels    `json:"labels,omitempty"`
	Images             []kustomizeImage     `json:"images,omitempty"`
}

type kustomizePatch struct {
	Path   string           `json:"path"`
	Target *kustomizeTarget `json:"target,omitempty"`
}

type kustomizeTarget struct {
	Group   string `json:"group,omitempty"`
	Version string `json:"version,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
}

type kustomizeGenerator struct {
	Name      string                     `json:"name"`
	Namespace string                     `json:"namespace,omitempty"`
	Files     []string                   `json:"files,omitempty"`
	Options   *kustomizeGeneratorOptions `json:"options,omitempty"`
}

type kustomizeGeneratorOptions struct {
	Labels                map[string]string `json:"labels,omitempty"`
	DisableNameSuffixHash bool              `json:"disableNameSuffixHash,omitempty"`
}

type kustomizeLabels struct {
	Pairs            map[string]string `json:"pairs"`
	IncludeSelectors bool              `json:"includeSelectors,omitempty"`
	IncludeTemplates bool              `json:"includeTemplates,omitempty"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// issuer is the part of cert-manager's Issuer (cert-manager.io/v1) that
// these manifests use.
type issuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SelfSigned *struct{} `json:"selfSigned,omitempty"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca,omitempty"`
	} `json:"spec"`
}

// certificate is the part of cert-manager's Certificate
// (cert-manager.io/v1) that these manifests use.
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		IsCA        bool     `json:"isCA,omitempty"`
		CommonName  string   `json:"commonName,omitempty"`
		SecretName  string   `json:"secretName"`
		DNSNames    []string `json:"dnsNames,omitempty"`
		URIs        []string `json:"uris,omitempty"`
		Usages      []string `json:"usages,omitempty"`
		Duration    string   `json:"duration,omitempty"`
		RenewBefore string   `json:"renewBefore,omitempty"`
		PrivateKey  *struct {
			Algorithm      string `json:"algorithm,omitempty"`
			Size           int    `json:"size,omitempty"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey,omitempty"`
		IssuerRef struct {
			Group string `json:"group,omitempty"`
			Kind  string `json:"kind,omitempty"`
			Name  string `json:"name"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

func TestEveryManifestDecodesStrictly(t *testing.T) {
	m := load(t)
	if len(m.objects) < 10 {
		t.Fatalf("decoded only %d objects from %d files", len(m.objects), len(m.files))
	}
	for _, o := range m.objects {
		if o.obj.GetName() == "" {
			t.Errorf("%s: a %T without a name", o.file, o.obj)
		}
	}
}

func TestStrictDecodingRejects(t *testing.T) {
	tests := []struct {
		name, doc string
	}{
		{"unknown field", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      hostNetwrok: true\n"},
		{"field in the wrong case", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      hostnetwork: true\n"},
		{"duplicate field", "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\nmetadata: {name: y}\n"},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "x.yaml")
			if err := os.WriteFile(f, []byte(tt.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := decodeObjects(f); err == nil {
				t.Errorf("decoded without error:\n%s", tt.doc)
			}
		})
	}
}
