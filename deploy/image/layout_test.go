package image

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The parts of the OCI image spec (v1.1, image-layout.md, image-index.md,
// manifest.md, config.md) the tests read.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

type ociIndex struct {
	SchemaVersion int          `json:"schemaVersion"`
	Manifests     []descriptor `json:"manifests"`
}

type ociManifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User         string              `json:"User"`
		Env          []string            `json:"Env"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

const (
	mediaManifest  = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig    = "application/vnd.oci.image.config.v1+json"
	mediaLayer     = "application/vnd.oci.image.layer.v1.tar"
	mediaLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
	refName        = "org.opencontainers.image.ref.name"
)

// image is one tagged image of a layout, checked: its manifest, config and
// the paths of its layer blobs in order.
type image struct {
	manifest ociManifest
	config   ociConfig
	layers   []string
}

// blobPath is where a layout keeps the blob of digest "sha256:HEX"; an
// error for any other algorithm or a malformed hex part.
func blobPath(layout, digest string) (string, error) {
	hexPart, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return "", fmt.Errorf("digest %q is not sha256:<64 lowercase hex>", digest)
	}
	return filepath.Join(layout, "blobs", "sha256", hexPart), nil
}

// readBlob reads the blob of d and checks its size and digest.
func readBlob(layout string, d descriptor) ([]byte, error) {
	p, err := blobPath(layout, d.Digest)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s: %d bytes, descriptor says %d", d.Digest, len(b), d.Size)
	}
	if got := "sha256:" + hexSum(b); got != d.Digest {
		return nil, fmt.Errorf("blob %s: content hashes to %s", d.Digest, got)
	}
	return b, nil
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// openLayout checks an OCI image layout (oci-layout, index.json, and the
// manifest, config and layer blobs of tag: sizes, digests, media types, the
// config's diff_ids against the uncompressed layers) and returns the image.
func openLayout(layout, tag string) (*image, error) {
	b, err := os.ReadFile(filepath.Join(layout, "oci-layout"))
	if err != nil {
		return nil, err
	}
	var ol struct {
		Version string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal(b, &ol); err != nil || ol.Version != "1.0.0" {
		return nil, fmt.Errorf("oci-layout %q: want imageLayoutVersion 1.0.0 (err %w)", b, err)
	}
	b, err = os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		return nil, err
	}
	var idx ociIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if idx.SchemaVersion != 2 {
		return nil, fmt.Errorf("index.json: schemaVersion %d, want 2", idx.SchemaVersion)
	}
	var md *descriptor
	var tags []string
	for i, d := range idx.Manifests {
		tags = append(tags, d.Annotations[refName])
		if d.Annotations[refName] == tag {
			md = &idx.Manifests[i]
		}
	}
	if md == nil {
		return nil, fmt.Errorf("index.json: no manifest tagged %q (tags %q)", tag, tags)
	}
	if md.MediaType != mediaManifest {
		return nil, fmt.Errorf("index.json: manifest media type %q, want %q", md.MediaType, mediaManifest)
	}
	img := &image{}
	if b, err = readBlob(layout, *md); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := json.Unmarshal(b, &img.manifest); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	m := img.manifest
	if m.SchemaVersion != 2 || m.Config.MediaType != mediaConfig || len(m.Layers) == 0 {
		return nil, fmt.Errorf("manifest: schemaVersion %d, config media type %q, %d layers; want 2, %q, at least one",
			m.SchemaVersion, m.Config.MediaType, len(m.Layers), mediaConfig)
	}
	if b, err = readBlob(layout, m.Config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := json.Unmarshal(b, &img.config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if got, want := len(img.config.RootFS.DiffIDs), len(m.Layers); got != want || img.config.RootFS.Type != "layers" {
		return nil, fmt.Errorf("config: rootfs %q with %d diff_ids for %d layers", img.config.RootFS.Type, got, want)
	}
	for i, l := range m.Layers {
		lb, err := readBlob(layout, l)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		p, _ := blobPath(layout, l.Digest)
		diffID, err := uncompressedDigest(l.MediaType, lb)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if diffID != img.config.RootFS.DiffIDs[i] {
			return nil, fmt.Errorf("layer %d: uncompressed digest %s, config's diff_id %s", i, diffID, img.config.RootFS.DiffIDs[i])
		}
		img.layers = append(img.layers, p)
	}
	return img, nil
}

// uncompressedDigest is the diff_id of a layer blob of the given media type.
func uncompressedDigest(mediaType string, blob []byte) (string, error) {
	r, err := layerReader(mediaType, strings.NewReader(string(blob)))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func layerReader(mediaType string, r io.Reader) (io.Reader, error) {
	switch mediaType {
	case mediaLayer:
		return r, nil
	case mediaLayerGzip:
		return gzip.NewReader(r)
	}
	return nil, fmt.Errorf("layer media type %q is neither %q nor %q", mediaType, mediaLayer, mediaLayerGzip)
}

// unpack extracts the image's layers in order into dir (which must exist
// and be empty), with owners, modes and links as archived, through an
// os.Root so that no entry or link can write outside dir. Whiteouts remove
// what a lower layer made; opaque whiteouts are refused (build-oci.sh makes
// one layer).
func unpack(img *image, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	for i, p := range img.layers {
		if err := unpackLayer(root, img.manifest.Layers[i].MediaType, p); err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return nil
}

func unpackLayer(root *os.Root, mediaType, blob string) error {
	f, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	r, err := layerReader(mediaType, f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := unpackEntry(root, tr, h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
}

func unpackEntry(root *os.Root, tr *tar.Reader, h *tar.Header) error {
	name := path.Clean(strings.TrimPrefix(h.Name, "./"))
	if name == "." || name == "/" {
		return nil
	}
	if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
		return errors.New("path outside the root filesystem")
	}
	dir, base := path.Split(name)
	if base == ".wh..wh..opq" {
		return errors.New("opaque whiteout not supported")
	}
	if gone, ok := strings.CutPrefix(base, ".wh."); ok {
		return root.RemoveAll(dir + gone)
	}
	if dir != "" {
		if err := root.MkdirAll(strings.TrimSuffix(dir, "/"), 0o755); err != nil {
			return err
		}
	}
	mode := h.FileInfo().Mode()
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return err
		}
	case tar.TypeReg:
		_ = root.Remove(name)
		out, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, tr); err != nil {
			_ = out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	case tar.TypeSymlink:
		_ = root.Remove(name)
		if err := root.Symlink(h.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		_ = root.Remove(name)
		return root.Link(path.Clean(strings.TrimPrefix(h.Linkname, "./")), name)
	default:
		return fmt.Errorf("entry type %q not expected in meshperf's image", h.Typeflag)
	}
	if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
		return err
	}
	if h.Typeflag == tar.TypeSymlink {
		return nil
	}
	// After chown, which clears set-id bits and file capabilities.
	if err := root.Chmod(name, mode&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
		return err
	}
	if c, ok := h.PAXRecords[paxCapability]; ok && h.Typeflag == tar.TypeReg {
		// The entry is a regular file just created inside root, so its
		// path under root.Name() names it.
		return unix.Setxattr(filepath.Join(root.Name(), name), "security.capability", []byte(c), 0)
	}
	return nil
}

// paxCapability is the PAX record GNU tar --xattrs writes a file's
// capabilities in.
const paxCapability = "SCHILY.xattr.security.capability"
