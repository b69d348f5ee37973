package kubecluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// binaryImage writes an OCI image archive, as `ctr images import` reads it,
// of one static binary on an empty base: the pause container and CoreDNS,
// which no registry can supply here, are built this way from the binaries
// hack/kube-deps.sh compiles.
func binaryImage(archive, ref, binary string, entrypoint []string, user string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("read %s: %w", binary, err)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	name := filepath.Base(binary)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(bin)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var layer bytes.Buffer
	zw := gzip.NewWriter(&layer)
	if _, err := zw.Write(layerTar.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entrypoint, "User": user},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digest(layerTar.Bytes())}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer.Bytes())},
	})
	if err != nil {
		return err
	}
	m := descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
	m["annotations"] = map[string]string{"io.containerd.image.name": ref}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{m}})
	if err != nil {
		return err
	}

	f, err := os.Create(archive)
	if err != nil {
		return fmt.Errorf("create %s: %w", archive, err)
	}
	defer f.Close()
	out := tar.NewWriter(f)
	files := []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(config), config},
		{blobPath(manifest), manifest},
		{blobPath(layer.Bytes()), layer.Bytes()},
	}
	for _, file := range files {
		if err := out.WriteHeader(&tar.Header{Name: file.name, Mode: 0o644, Size: int64(len(file.body)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := out.Write(file.body); err != nil {
			return err
		}
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write %s: %w", archive, err)
	}
	return f.Close()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(b []byte) string {
	sum := sha256.Sum256(b)
	return "blobs/sha256/" + hex.EncodeToString(sum[:])
}

func descriptor(mediaType string, b []byte) map[string]any {
	return map[string]any{"mediaType": mediaType, "digest": digest(b), "size": len(b)}
}
