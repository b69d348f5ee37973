package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Every sample StreamQuery declares the configHash this worker registers
// with, so that the worker runs any of them as declared: with another hash
// its registration is a 409, and the StreamQuery reports ConfigConflict.
func TestTheSamplesDeclareTheReferenceWorkersConfigHash(t *testing.T) {
	samples := filepath.Join("..", "..", "config", "samples")
	seen := 0
	err := filepath.WalkDir(samples, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var doc struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Spec struct {
					ConfigHash string `json:"configHash"`
				} `json:"spec"`
			}
			if err := dec.Decode(&doc); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if doc.Kind != "StreamQuery" {
				continue
			}
			seen++
			if doc.Spec.ConfigHash != configHash {
				t.Errorf("%s: StreamQuery %s declares configHash %q; the reference worker registers %q",
					path, doc.Metadata.Name, doc.Spec.ConfigHash, configHash)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatalf("no StreamQuery under %s", samples)
	}
}
