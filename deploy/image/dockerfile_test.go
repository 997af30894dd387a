package image

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The runtime config both images have; TestOCIImage checks the OCI image's,
// TestDockerfileAgrees the Dockerfile's.
const (
	wantUser  = "65532:65532"
	wantCmd   = `["coordinator", "serve"]`
	wantPorts = "7700 9090 8080"
)

// TestDockerfileAgrees: the Dockerfile installs packages.txt (no list of
// its own) and has the runtime config the OCI image has, so the two builds
// stay one image; and packages.txt names the packages of the tools
// TestOCIImage runs.
func TestDockerfileAgrees(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	line := func(instr string) string {
		m := regexp.MustCompile(`(?m)^`+instr+`\s+(.+?)\s*$`).FindAllStringSubmatch(df, -1)
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1][1]
	}
	checks := []struct {
		name      string
		got, want string
	}{
		{"copies the package list", line("COPY deploy/image/packages.txt"), "/tmp/packages.txt"},
		{"USER", line("USER"), wantUser},
		{"EXPOSE", line("EXPOSE"), wantPorts},
		{"CMD", line("CMD"), wantCmd},
		{"no ENTRYPOINT", line("ENTRYPOINT"), ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("Dockerfile %s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if !regexp.MustCompile(`/tmp/packages.txt \| xargs \\\s*\n\s*env DEBIAN_FRONTEND=noninteractive apt-get install`).MatchString(df) {
		t.Error("Dockerfile: apt-get install does not take its packages from /tmp/packages.txt")
	}
	for _, p := range readPackages(t) {
		if strings.Contains(df, " "+p+" ") {
			t.Errorf("Dockerfile names package %q itself; it belongs in deploy/image/packages.txt only", p)
		}
	}
}

// readPackages is deploy/image/packages.txt without comments and blanks.
func readPackages(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "image", "packages.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for l := range strings.Lines(string(b)) {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			pkgs = append(pkgs, l)
		}
	}
	return pkgs
}

// TestPackagesHaveTheTools: each tool the agent runs comes from a package
// in packages.txt (Debian bookworm's package names).
func TestPackagesHaveTheTools(t *testing.T) {
	pkgs := map[string]bool{}
	for _, p := range readPackages(t) {
		pkgs[p] = true
	}
	tools := []struct{ tool, pkg string }{
		{"ping", "iputils-ping"},
		{"qperf", "qperf"},
		{"iperf3", "iperf3"},
		{"curl", "curl"},
		{"ab", "apache2-utils"},
		{"ip", "iproute2"},
		{"iptables", "iptables"},
		{"TLS roots", "ca-certificates"},
	}
	for _, tt := range tools {
		if !pkgs[tt.pkg] {
			t.Errorf("%s: package %s not in packages.txt", tt.tool, tt.pkg)
		}
	}
}
