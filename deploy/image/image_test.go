package image

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testVersion is the version the test links in and tags the image with.
const testVersion = "v0.0.0-imagetest"

// buildTimeout bounds build-oci.sh: go build, mmdebstrap (about two
// minutes with a cold .deb cache), tar and umoci take a few minutes on an
// idle machine; the bound leaves room for a loaded one.
const buildTimeout = 20 * time.Minute

// repoRoot is the module's root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return dir
}

// buildImage runs deploy/image/build-oci.sh into a temporary layout and
// returns its path; it fails the test with the script's output on error.
func buildImage(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the OCI image build (mmdebstrap's root mode, the image's file owners); run the tests as root")
	}
	layout := filepath.Join(t.TempDir(), "oci", "meshperf")
	ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(t), "deploy", "image", "build-oci.sh"))
	cmd.Env = append(os.Environ(), "OCI_OUT="+layout, "VERSION="+testVersion, "TMPDIR="+t.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build-oci.sh: %v\n%s", err, out)
	}
	t.Logf("build-oci.sh in %v: %s", time.Since(start).Round(time.Second), lastLine(string(out)))
	return layout
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// chroot runs argv in rootfs as user ("" = root), with the image's
// environment only, bounded in time, and returns its combined output. As in
// a container, /proc is mounted (qperf reads /proc/stat): in a mount and
// PID namespace of the command's own, so the mount goes with it.
func chroot(t *testing.T, rootfs, user string, env, argv []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	chrootPath, err := exec.LookPath("chroot")
	if err != nil {
		t.Fatalf("chroot (coreutils): %v", err)
	}
	// unshare runs chroot by its path: the command's environment is empty.
	args := []string{"--mount", "--pid", "--fork", "--kill-child", "--mount-proc=" + filepath.Join(rootfs, "proc"), chrootPath}
	if user != "" {
		args = append(args, "--userspec="+user)
	}
	// env -i inside the chroot: the image's PATH looks the program up.
	args = append(append(append(args, rootfs, "/usr/bin/env", "-i"), env...), argv...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestOCIImage builds the image with build-oci.sh, checks the layout and
// its config, unpacks its layers and runs, in a chroot of them, the
// entrypoints and each tool the agent runs, by name on the image's PATH.
func TestOCIImage(t *testing.T) {
	layout := buildImage(t)
	img, err := openLayout(layout, testVersion)
	if err != nil {
		t.Fatalf("layout %s: %v", layout, err)
	}

	t.Run("config", func(t *testing.T) {
		c := img.config
		checks := []struct {
			name      string
			got, want any
		}{
			{"os", c.OS, "linux"},
			{"user", c.Config.User, wantUser},
			{"cmd", `["` + strings.Join(c.Config.Cmd, `", "`) + `"]`, wantCmd},
			{"entrypoint", len(c.Config.Entrypoint), 0},
			{"exposed ports", strings.Join(slices.Sorted(maps.Keys(c.Config.ExposedPorts)), " "), tcpPorts(wantPorts)},
			{"version label", c.Config.Labels["org.opencontainers.image.version"], testVersion},
			{"source label", c.Config.Labels["org.opencontainers.image.source"], "https://github.com/meshperf/meshperf"},
			{"revision label set", c.Config.Labels["org.opencontainers.image.revision"] != "", true},
			{"PATH has /usr/local/bin", strings.Contains(envValue(c.Config.Env, "PATH"), "/usr/local/bin"), true},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
			}
		}
	})

	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unpack(img, rootfs); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	env := []string{"PATH=" + envValue(img.config.Config.Env, "PATH")}

	// The entrypoints, as the image's default user (the coordinator's) and
	// as root (the agent's DaemonSet), then every program the agent runs
	// (agent/runner's tools, nsenter for other namespaces) and the network
	// tools a node is inspected with. Version flags only: no traffic.
	runs := []struct {
		name string
		user string
		argv []string
		want string
	}{
		{"coordinator --version as the default user", img.config.Config.User, []string{"coordinator", "--version"}, "coordinator version " + testVersion},
		{"agent --version as root", "", []string{"agent", "--version"}, "agent version " + testVersion},
		{"ping", "", []string{"ping", "-V"}, "iputils"},
		{"qperf", "", []string{"qperf", "--version"}, "qperf"},
		{"iperf3", "", []string{"iperf3", "--version"}, "iperf 3"},
		{"curl", "", []string{"curl", "--version"}, "curl "},
		{"ab", "", []string{"ab", "-V"}, "ApacheBench"},
		{"ip", "", []string{"ip", "-V"}, "iproute2"},
		{"iptables", "", []string{"iptables", "--version"}, "iptables v"},
		{"nsenter", "", []string{"nsenter", "--version"}, "util-linux"},
		{"CA certificates", "", []string{"test", "-s", "/etc/ssl/certs/ca-certificates.crt"}, ""},
		{"state directory owned by 65532", "", []string{"stat", "-c", "%u:%g", "/var/lib/meshperf"}, "65532:65532"},
		{"runtime directory owned by 65532", "", []string{"stat", "-c", "%u:%g", "/run/meshperf"}, "65532:65532"},
		{"user meshperf", "", []string{"getent", "passwd", "65532"}, "meshperf:x:65532:65532:"},
		{"no apt lists left", "", []string{"find", "/var/lib/apt/lists", "-type", "f", "-name", "*_Packages"}, ""},
	}
	// ping keeps the capability its package sets (cap_net_raw), so users
	// other than root can ping too.
	t.Run("ping has cap_net_raw", func(t *testing.T) {
		buf := make([]byte, 64)
		n, err := unix.Getxattr(filepath.Join(rootfs, "usr", "bin", "ping"), "security.capability", buf)
		// VFS capability data: magic/revision, then permitted bits; bit 13 is CAP_NET_RAW.
		if err != nil || n < 8 || buf[4+1]&(1<<(unix.CAP_NET_RAW-8)) == 0 {
			t.Fatalf("/usr/bin/ping capability xattr: %x, %v; want cap_net_raw permitted", buf[:max(n, 0)], err)
		}
	})
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			out, err := chroot(t, rootfs, r.user, env, r.argv)
			if err != nil {
				t.Fatalf("%q in the image: %v\n%s", r.argv, err, out)
			}
			if r.want == "" && r.argv[0] == "find" && strings.TrimSpace(out) != "" {
				t.Fatalf("%q printed %q, want nothing", r.argv, out)
			}
			if !strings.Contains(out, r.want) {
				t.Fatalf("%q printed %q, want it to contain %q", r.argv, out, r.want)
			}
		})
	}
}

// tcpPorts turns "7700 9090" into the OCI config's sorted "7700/tcp 9090/tcp".
func tcpPorts(ports string) string {
	var out []string
	for _, p := range strings.Fields(ports) {
		out = append(out, p+"/tcp")
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// envValue is the value of KEY in a list of KEY=VALUE, or "".
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
