package kubernetes

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// chartDir is the Helm chart, from deploy/kubernetes.
const chartDir = "../helm/meshperf"

// kustomizeRoot is where kustomizeBuild copies deploy/kubernetes in its
// in-memory file system.
const kustomizeRoot = "/k"

// kustomizeBuild renders, as `kustomize build` does (the kustomize API
// library, krusty), a kustomization of resources and components, both
// paths relative to deploy/kubernetes: e.g. resources ["cert-manager"],
// components ["monitoring"]. It works on an in-memory copy of this
// directory, so it writes nothing here.
func kustomizeBuild(resources, components []string) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".json")) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join(kustomizeRoot, filepath.ToSlash(p)), b)
	})
	if err != nil {
		return nil, err
	}
	var k strings.Builder
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range resources {
		fmt.Fprintf(&k, "  - %s\n", path.Join("..", kustomizeRoot, r))
	}
	if len(components) > 0 {
		k.WriteString("components:\n")
		for _, c := range components {
			fmt.Fprintf(&k, "  - %s\n", path.Join("..", kustomizeRoot, c))
		}
	}
	dir := "/rendering" // beside the copy: kustomize refuses a root inside another

	if err := mem.WriteFile(path.Join(dir, "kustomization.yaml"), []byte(k.String())); err != nil {
		return nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build of resources %v components %v: %w", resources, components, err)
	}
	return res.AsYaml()
}

// helmBinary is the helm that the chart's tests run: ./bin/helm of the
// repository (`make helm` installs the pinned version there), else helm
// on PATH. Without one the test is skipped, or fails when the environment
// says helm must be there: CI set (.ci/run, whose `make test` installs
// it) or MESHPERF_REQUIRE_HELM=1.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs("../../bin/helm"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("helm")
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" || os.Getenv("MESHPERF_REQUIRE_HELM") == "1" {
		t.Fatal("helm not installed (make helm installs the pinned version into ./bin); CI or MESHPERF_REQUIRE_HELM=1 requires it")
	}
	t.Skip("missing tool: helm (make helm or make test-deps installs the pinned version into ./bin)")
	return ""
}

// helm runs the helm binary with args in deploy/kubernetes and returns
// its standard output; an error carries standard error.
func helm(bin string, args ...string) ([]byte, error) {
	out, _, err := helmRun(bin, args...)
	return out, err
}

// helmRun is helm, returning standard error too.
func helmRun(bin string, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.Command(bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	// Helm's own state (repositories, cache) stays out of $HOME.
	tmp, err := os.MkdirTemp("", "meshperf-helm-")
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp+"/cache", "HELM_CONFIG_HOME="+tmp+"/config", "HELM_DATA_HOME="+tmp+"/data")
	if err := cmd.Run(); err != nil {
		return o.Bytes(), e.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, e.Bytes(), o.Bytes())
	}
	return o.Bytes(), e.Bytes(), nil
}

// helmValuesFile writes values (YAML) to a temporary file, removed when
// the test ends, and returns its path (without the test's name, whose
// commas helm's -f would split at).
func helmValuesFile(t *testing.T, values string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "meshperf-values-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// helmTemplate renders the chart as release meshperf in namespace ns with
// the values (YAML; "" for the defaults).
func helmTemplate(t *testing.T, bin, ns, values string) ([]byte, error) {
	t.Helper()
	return helm(bin, "template", "meshperf", chartDir, "--namespace", ns, "-f", helmValuesFile(t, values))
}

// renderedManifests decodes a rendering (named name in errors) strictly
// into manifests that the invariants check.
func renderedManifests(name string, b []byte) (*manifests, error) {
	objs, err := decodeStream(name, b)
	if err != nil {
		return nil, err
	}
	return &manifests{
		objects: objs, rendered: true,
		kustomizations: map[string]*kustomization{}, patches: map[string][]jsonPatchOp{}, data: map[string][]byte{},
	}, nil
}
