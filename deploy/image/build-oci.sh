#!/usr/bin/env bash
# Builds meshperf's image with no registry and no container engine: the
# agent and the coordinator (go build, static), a Debian bookworm root
# filesystem with the measuring tools (mmdebstrap, packages from
# deploy/image/packages.txt, the Dockerfile's list), packed as one layer into
# an OCI image layout (umoci, from Debian). Run as root (mmdebstrap's root
# mode, the image's owners). `make image-oci` runs it.
#
# Environment (all optional):
#   OCI_OUT     the OCI layout to write, replaced whole (default out/oci/meshperf);
#               the image's tag is VERSION: oci:$OCI_OUT:$VERSION
#   VERSION     version linked into the binaries and the image's tag
#               (default: git describe --tags --always --dirty, else dev)
#   DEB_CACHE   .deb cache kept between runs (default ~/.cache/meshperf/debs)
#   APT_MIRROR  Debian mirror URI (default: the first .../debian URI in this
#               machine's apt sources, else http://deb.debian.org/debian)
#   APT_SECURITY_MIRROR  the security archive's URI (default likewise)
#   SUITE       Debian suite (default bookworm, the Dockerfile's base)
#   PACKAGES_FILE  the package list (default deploy/image/packages.txt)
#
# Reproducible-ish: SOURCE_DATE_EPOCH (default: the last commit's time) fixes
# the files' times, the image's creation time and mmdebstrap's output; the
# packages are whatever the mirror serves that day.
set -euo pipefail
export PATH="${PATH}:/usr/local/sbin:/usr/sbin:/sbin"

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"

die() { echo "build-oci: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (mmdebstrap and the image's file owners); run: sudo $0"
for t in go mmdebstrap umoci tar; do
	command -v "$t" >/dev/null 2>&1 || die "$t not found on PATH; run deploy/lab/install-test-deps.sh (mmdebstrap and umoci are Debian packages)"
done

OCI_OUT=${OCI_OUT:-$repo/out/oci/meshperf}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH
SUITE=${SUITE:-bookworm}
PACKAGES_FILE=${PACKAGES_FILE:-$repo/deploy/image/packages.txt}
DEB_CACHE=${DEB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/meshperf/debs}
SOURCE_URL=${SOURCE_URL:-https://github.com/meshperf/meshperf}

# An OCI tag: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}.
[[ $VERSION =~ ^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$ ]] || die "VERSION ${VERSION@Q} is not a valid image tag"
[[ $SOURCE_DATE_EPOCH =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH ${SOURCE_DATE_EPOCH@Q} is not a number of seconds"
[[ -r $PACKAGES_FILE ]] || die "package list $PACKAGES_FILE not readable"
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$PACKAGES_FILE" | grep -v '^$')
[[ ${#packages[@]} -gt 0 ]] || die "package list $PACKAGES_FILE is empty"

# The first URI of this machine's apt sources (deb822 or one-line) whose
# path ends in /$1, so the build uses the mirror the machine already uses.
host_mirror() {
	local want=$1 f uri
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[[ -r $f ]] || continue
		uri=$(sed -n -e 's/^[[:space:]]*URIs:[[:space:]]*//p' \
			-e 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' "$f" |
			tr ' ' '\n' | grep -E "^(https?|file)://[^[:space:]]+/${want}/?\$" | head -n1 || true)
		if [[ -n $uri ]]; then echo "${uri%/}"; return; fi
	done
	echo "http://deb.debian.org/${want}"
}
APT_MIRROR=${APT_MIRROR:-$(host_mirror debian)}
APT_SECURITY_MIRROR=${APT_SECURITY_MIRROR:-$(host_mirror debian-security)}

work=$(mktemp -d "${TMPDIR:-/tmp}/meshperf-oci.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "build-oci: version $VERSION, suite $SUITE, mirror $APT_MIRROR, ${#packages[@]} packages"

# The binaries, as the Dockerfile builds them.
CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X github.com/meshperf/meshperf/internal/version.Version=${VERSION}" \
	-o "$work/bin/" ./cmd/agent ./cmd/coordinator

# The root filesystem. The .debs go through DEB_CACHE (sync-in before the
# download, sync-out before mmdebstrap's cleanup empties the cache), so a
# second run downloads only what changed.
mkdir -p "$DEB_CACHE"
include=$(IFS=,; echo "${packages[*]}")
mmdebstrap --quiet --mode=root --variant=minbase --include="$include" \
	--skip=essential/unlink \
	--setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
	--setup-hook="sync-in $DEB_CACHE /var/cache/apt/archives/" \
	--customize-hook="sync-out /var/cache/apt/archives $DEB_CACHE" \
	--customize-hook='chroot "$1" groupadd --gid 65532 meshperf' \
	--customize-hook='chroot "$1" useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin meshperf' \
	"$SUITE" "$work/rootfs" \
	"deb $APT_MIRROR $SUITE main" \
	"deb $APT_MIRROR $SUITE-updates main" \
	"deb $APT_SECURITY_MIRROR $SUITE-security main"

# After mmdebstrap's cleanup (which empties /run): the Dockerfile's
# directories and binaries; no apt or dpkg logs, binary caches, or this
# machine's resolv.conf and hostname (the runtime provides both).
rootfs="$work/rootfs"
install -d -o 65532 -g 65532 "$rootfs/var/lib/meshperf" "$rootfs/run/meshperf"
install -m 0755 -o 0 -g 0 "$work/bin/agent" "$work/bin/coordinator" "$rootfs/usr/local/bin/"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/apt/* \
	"$rootfs/var/log/dpkg.log" "$rootfs/var/log/alternatives.log" "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"

# One layer: the tree in name order, times clamped, numeric owners, file
# capabilities kept (ping's), no device nodes (the runtime makes /dev).
tar --create --file "$work/layer.tar" --directory "$rootfs" \
	--sort=name --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime \
	--format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
	--xattrs --xattrs-include=security.capability \
	--exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' --exclude='./tmp/*' .

created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
layout="$work/layout"
umoci init --layout "$layout"
umoci new --image "$layout:$VERSION"
umoci raw add-layer --image "$layout:$VERSION" --history.created "$created" \
	--history.created_by "deploy/image/build-oci.sh: mmdebstrap $SUITE minbase + ${include}; agent, coordinator" \
	"$work/layer.tar"
# The Dockerfile's runtime config: non-root by default (the agent's
# DaemonSet runs it as root), the coordinator's ports (gRPC, metrics, web).
umoci config --image "$layout:$VERSION" --no-history \
	--created "$created" --author "meshperf" --os linux --architecture "$(go env GOARCH)" \
	--config.user 65532:65532 \
	--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--config.cmd coordinator --config.cmd serve \
	--config.exposedports 7700/tcp --config.exposedports 9090/tcp --config.exposedports 8080/tcp \
	--config.label "org.opencontainers.image.source=$SOURCE_URL" \
	--config.label "org.opencontainers.image.version=$VERSION" \
	--config.label "org.opencontainers.image.revision=$REVISION" \
	--config.label "org.opencontainers.image.created=$created" \
	--manifest.annotation "org.opencontainers.image.version=$VERSION" \
	--manifest.annotation "org.opencontainers.image.revision=$REVISION"
umoci gc --layout "$layout"
# umoci writes blobs 0600; skopeo or crane run by a user must read them.
chmod -R a+rX "$layout"

# Replace the output whole, so a rerun leaves exactly this image.
mkdir -p "$(dirname "$OCI_OUT")"
rm -rf "$OCI_OUT"
mv "$layout" "$OCI_OUT"
echo "build-oci: wrote oci:$OCI_OUT:$VERSION ($(du -sh "$OCI_OUT" | cut -f1))"
