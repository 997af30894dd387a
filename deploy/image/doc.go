// Package image holds how meshperf's container image is built and released:
// packages.txt (the Debian packages both builds install), build-oci.sh
// (`make image-oci`: the image from Debian packages with mmdebstrap and
// umoci, as an OCI layout, with no registry and no container engine) and,
// in its tests, the checks that the OCI image is well formed and runs (its
// entrypoints and every tool the agent needs, in a chroot of its unpacked
// layers), that the Dockerfile installs the same packages and runtime config,
// and that the release workflow under .github/workflows pins the image name
// the manifests use.
package image
