package image

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// workflow is the part of a GitHub Actions workflow file the workflows
// here use; decoded with KnownFields, so a misspelt key fails the test.
type workflow struct {
	Name        string            `yaml:"name"`
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Env         map[string]string `yaml:"env"`
	Jobs        map[string]struct {
		RunsOn         string `yaml:"runs-on"`
		TimeoutMinutes int    `yaml:"timeout-minutes"`
		Container      struct {
			Image   string `yaml:"image"`
			Options string `yaml:"options"`
		} `yaml:"container"`
		Steps []step `yaml:"steps"`
	} `yaml:"jobs"`
}

type step struct {
	Name string            `yaml:"name"`
	ID   string            `yaml:"id"`
	Uses string            `yaml:"uses"`
	With map[string]any    `yaml:"with"`
	Env  map[string]string `yaml:"env"`
	Run  string            `yaml:"run"`
}

func readWorkflow(t *testing.T, name string) (workflow, []step) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "workflows", name))
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var steps []step
	for name, j := range w.Jobs {
		if j.RunsOn == "" || j.TimeoutMinutes <= 0 || len(j.Steps) == 0 {
			t.Errorf("job %s: runs-on %q, timeout-minutes %d, %d steps: want all set", name, j.RunsOn, j.TimeoutMinutes, len(j.Steps))
		}
		steps = append(steps, j.Steps...)
	}
	return w, steps
}

// pinnedAction is an action reference with a version: owner/name@vN[.N.N].
var pinnedAction = regexp.MustCompile(`^[a-z0-9-]+/[a-z0-9-]+@v[0-9]+(\.[0-9]+){0,2}$`)

// manifestImages are the container images deploy/kubernetes/base runs and
// the name its kustomization rewrites: "name[:tag]" each.
func manifestImages(t *testing.T) (images []string, kustomizeName string) {
	t.Helper()
	base := filepath.Join(repoRoot(t), "deploy", "kubernetes", "base")
	files, err := filepath.Glob(filepath.Join(base, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	imageLine := regexp.MustCompile(`(?m)^\s+image:\s*(\S+)\s*$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "kustomization.yaml" {
			var k struct {
				Images []struct {
					Name string `yaml:"name"`
				} `yaml:"images"`
			}
			if err := yaml.Unmarshal(b, &k); err != nil || len(k.Images) != 1 {
				t.Fatalf("%s: images %v (err %v), want one", f, k.Images, err)
			}
			kustomizeName = k.Images[0].Name
			continue
		}
		for _, m := range imageLine.FindAllStringSubmatch(string(b), -1) {
			images = append(images, m[1])
		}
	}
	return images, kustomizeName
}

func imageName(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

func TestReleaseWorkflow(t *testing.T) {
	w, steps := readWorkflow(t, "release.yml")
	images, kustomizeName := manifestImages(t)
	manifestImage := w.Env["MANIFEST_IMAGE"]
	var build, pin *step
	for i, s := range steps {
		switch {
		case strings.HasPrefix(s.Uses, "docker/build-push-action@"):
			build = &steps[i]
		case strings.Contains(s.Run, "kustomize edit set image"):
			pin = &steps[i]
		}
		if s.Uses != "" && !pinnedAction.MatchString(s.Uses) {
			t.Errorf("step %q uses %q: want owner/name@vN", s.Name, s.Uses)
		}
	}
	var buildTags string
	if build != nil {
		buildTags, _ = build.With["tags"].(string)
	}
	push, _ := w.On["push"].(map[string]any)
	tags, _ := push["tags"].([]any)
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"runs on tags v*", slices.Contains(tags, any("v*")) && len(w.On) == 1, w.On},
		{"may push packages and write releases", w.Permissions["packages"] == "write" && w.Permissions["contents"] == "write", w.Permissions},
		{"a build-push step", build != nil, build},
		{"builds linux/amd64 and linux/arm64", build != nil && build.With["platforms"] == "linux/amd64,linux/arm64", build},
		{"pushes", build != nil && build.With["push"] == true, build},
		{"tags TAG and latest", strings.Contains(buildTags, ":${{ steps.meta.outputs.tag }}") && strings.Contains(buildTags, ":latest"), buildTags},
		{"links the tag in as the version", build != nil && build.With["build-args"] == "VERSION=${{ steps.meta.outputs.tag }}", build},
		{"pins the manifests' image name", pin != nil && strings.Contains(pin.Run, `kustomize edit set image "${MANIFEST_IMAGE}=`), pin},
		{"MANIFEST_IMAGE is the kustomization's image name", manifestImage != "" && manifestImage == kustomizeName, kustomizeName},
		{"the manifests run it", len(images) > 0, images},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("release.yml: %s: got %+v", c.name, c.got)
		}
	}
	for _, ref := range images {
		if imageName(ref) != manifestImage {
			t.Errorf("a manifest runs %q, but release.yml pins %q", ref, manifestImage)
		}
	}
	// The chart (deploy/helm/meshperf, when present) names the same image.
	values := filepath.Join(repoRoot(t), "deploy", "helm", "meshperf", "values.yaml")
	if b, err := os.ReadFile(values); err == nil {
		var v struct {
			Image struct {
				Repository string `yaml:"repository"`
			} `yaml:"image"`
		}
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", values, err)
		}
		if v.Image.Repository != manifestImage {
			t.Errorf("%s: image.repository %q, release.yml pins %q", values, v.Image.Repository, manifestImage)
		}
	}
}

func TestCIWorkflow(t *testing.T) {
	w, steps := readWorkflow(t, "ci.yml")
	runsCI := false
	for _, s := range steps {
		if s.Uses != "" && !pinnedAction.MatchString(s.Uses) {
			t.Errorf("step %q uses %q: want owner/name@vN", s.Name, s.Uses)
		}
		runsCI = runsCI || strings.Contains(s.Run, ".ci/run")
	}
	_, onPush := w.On["push"]
	_, onPR := w.On["pull_request"]
	if !runsCI || !onPush || !onPR {
		t.Errorf("ci.yml: runs .ci/run %v, on push %v, on pull_request %v: want all", runsCI, onPush, onPR)
	}
	for name, j := range w.Jobs {
		if j.Container.Image != "debian:12" || !strings.Contains(j.Container.Options, "--privileged") {
			t.Errorf("ci.yml job %s: container %+v, want debian:12 --privileged (root, network namespaces, chroot)", name, j.Container)
		}
	}
}
