package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEntry is one tar entry of a synthetic layer.
type fakeEntry struct {
	name, link, body string
	typ              byte
}

// writeLayout writes a one-layer OCI layout tagged "t" whose layer holds
// entries, then lets edit change the files before it returns the path.
func writeLayout(t *testing.T, entries []fakeEntry, edit func(layout string, m *ociManifest, idx *ociIndex)) string {
	t.Helper()
	layout := t.TempDir()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o755, Size: int64(len(e.body)),
			Uid: os.Getuid(), Gid: os.Getgid()}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); e.typ == tar.TypeReg && err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	put := func(b []byte) descriptor {
		d := descriptor{Digest: "sha256:" + hexSum(b), Size: int64(len(b))}
		p, _ := blobPath(layout, d.Digest)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	layer := put(gz.Bytes())
	layer.MediaType = mediaLayerGzip
	cfg, _ := json.Marshal(map[string]any{"os": "linux", "rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hexSum(raw.Bytes())}}})
	m := ociManifest{SchemaVersion: 2, MediaType: mediaManifest, Config: put(cfg), Layers: []descriptor{layer}}
	m.Config.MediaType = mediaConfig
	idx := ociIndex{SchemaVersion: 2}
	if edit != nil {
		edit(layout, &m, &idx)
	}
	mb, _ := json.Marshal(m)
	md := put(mb)
	md.MediaType = mediaManifest
	md.Annotations = map[string]string{refName: "t"}
	idx.Manifests = append(idx.Manifests, md)
	ib, _ := json.Marshal(idx)
	if err := os.WriteFile(filepath.Join(layout, "index.json"), ib, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return layout
}

var goodEntries = []fakeEntry{
	{name: "./usr/", typ: tar.TypeDir},
	{name: "./usr/bin/", typ: tar.TypeDir},
	{name: "./usr/bin/tool", body: "#!/bin/sh\n", typ: tar.TypeReg},
	{name: "./bin", link: "usr/bin", typ: tar.TypeSymlink},
	{name: "./usr/bin/tool2", link: "./usr/bin/tool", typ: tar.TypeLink},
}

func TestOpenLayoutChecks(t *testing.T) {
	tests := []struct {
		name    string
		entries []fakeEntry
		edit    func(layout string, m *ociManifest, idx *ociIndex)
		tag     string
		wantErr string // "" = valid
	}{
		{name: "valid", entries: goodEntries, tag: "t"},
		{name: "other tag", entries: goodEntries, tag: "v9", wantErr: `no manifest tagged "v9"`},
		{name: "config blob changed", entries: goodEntries, tag: "t", wantErr: "config: blob",
			edit: func(l string, m *ociManifest, _ *ociIndex) {
				p, _ := blobPath(l, m.Config.Digest)
				b, _ := os.ReadFile(p)
				_ = os.WriteFile(p, bytes.Replace(b, []byte("linux"), []byte("linuz"), 1), 0o644) // a failed write leaves the blob intact: the case then fails on wantErr
			}},
		{name: "layer size wrong", entries: goodEntries, tag: "t", wantErr: "layer 0: blob",
			edit: func(_ string, m *ociManifest, _ *ociIndex) { m.Layers[0].Size++ }},
		{name: "layer media type unknown", entries: goodEntries, tag: "t", wantErr: "neither",
			edit: func(_ string, m *ociManifest, _ *ociIndex) { m.Layers[0].MediaType = "application/x-zstd" }},
		{name: "diff_id of another layer", entries: goodEntries, tag: "t", wantErr: "diff_ids for 2 layers",
			edit: func(_ string, m *ociManifest, _ *ociIndex) { m.Layers = append(m.Layers, m.Layers[0]) }},
		{name: "index schema version", entries: goodEntries, tag: "t", wantErr: "schemaVersion 3",
			edit: func(_ string, _ *ociManifest, idx *ociIndex) { idx.SchemaVersion = 3 }},
		{name: "digest not sha256", entries: goodEntries, tag: "t", wantErr: "not sha256",
			edit: func(_ string, m *ociManifest, _ *ociIndex) { m.Config.Digest = "md5:00" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layout := writeLayout(t, tt.entries, tt.edit)
			img, err := openLayout(layout, tt.tag)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("openLayout: err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("openLayout: %v", err)
			}
			dir := t.TempDir()
			if err := unpack(img, dir); err != nil {
				t.Fatalf("unpack: %v", err)
			}
			for _, p := range []string{"usr/bin/tool", "bin/tool", "usr/bin/tool2"} {
				if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != "#!/bin/sh\n" {
					t.Errorf("%s: %q, %v", p, b, err)
				}
			}
		})
	}
}

// TestUnpackStaysInside: entries and links that would write outside the
// root filesystem fail the unpack and leave the outside untouched.
func TestUnpackStaysInside(t *testing.T) {
	outside := t.TempDir()
	tests := []struct {
		name    string
		entries []fakeEntry
	}{
		{"dot-dot path", []fakeEntry{{name: "../../escape", body: "x", typ: tar.TypeReg}}},
		{"absolute symlink then a file through it", []fakeEntry{
			{name: "./out", link: outside, typ: tar.TypeSymlink},
			{name: "./out/escape", body: "x", typ: tar.TypeReg}}},
		{"relative symlink up then a file through it", []fakeEntry{
			{name: "./out", link: "../../../../../../../../" + outside, typ: tar.TypeSymlink},
			{name: "./out/escape", body: "x", typ: tar.TypeReg}}},
		{"hard link to outside", []fakeEntry{{name: "./l", link: "../../etc/passwd", typ: tar.TypeLink}}},
		{"device node", []fakeEntry{{name: "./dev/null", typ: tar.TypeChar}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := openLayout(writeLayout(t, tt.entries, nil), "t")
			if err != nil {
				t.Fatal(err)
			}
			if err := unpack(img, t.TempDir()); err == nil {
				t.Fatal("unpack succeeded, want an error")
			}
			if _, err := os.Stat(filepath.Join(outside, "escape")); err == nil {
				t.Fatal("unpack wrote outside its root")
			}
		})
	}
}
