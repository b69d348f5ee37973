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

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/pipeline/sqlquery"
)

// Every sample StreamQuery declares a pipeline that compiles (spec.pipeline,
// or spec.sql as this worker's --pipeline FILE.sql reads it), and the two
// the tour runs with this worker given no --pipeline (clicks-per-page, and
// acme's orders-per-minute) declare exactly its default, so that the
// operator registers the hash the worker registers: with another, the
// worker's registration is a 409 and the StreamQuery reports
// ConfigConflict.
func TestTheSamplesDeclarePipelinesThisWorkerRuns(t *testing.T) {
	spec, err := pipeline.Parse(countPerMinute)
	if err != nil {
		t.Fatal(err)
	}
	defaultHash := spec.ConfigHash()
	runByDefault := map[string]bool{"clicks-per-page": true, "orders-per-minute": true} // true: not found yet
	samples := filepath.Join("..", "..", "config", "samples")
	err = filepath.WalkDir(samples, func(path string, d fs.DirEntry, err error) error {
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
					Pipeline *v1.Pipeline `json:"pipeline"`
					SQL      string       `json:"sql"`
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
			if doc.Spec.SQL != "" {
				if _, err := sqlquery.Compile(doc.Spec.SQL); err != nil {
					t.Errorf("%s: StreamQuery %s: %v", path, doc.Metadata.Name, err)
				}
				continue
			}
			if doc.Spec.Pipeline == nil {
				t.Errorf("%s: StreamQuery %s declares no pipeline", path, doc.Metadata.Name)
				continue
			}
			if _, err := pipeline.Compile(*doc.Spec.Pipeline); err != nil {
				t.Errorf("%s: StreamQuery %s: %v", path, doc.Metadata.Name, err)
			}
			if _, ok := runByDefault[doc.Metadata.Name]; ok {
				runByDefault[doc.Metadata.Name] = false // found
				if got := doc.Spec.Pipeline.ConfigHash(); got != defaultHash {
					t.Errorf("%s: StreamQuery %s hashes to %s; this worker's default pipeline to %s",
						path, doc.Metadata.Name, got, defaultHash)
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, missing := range runByDefault {
		if missing {
			t.Errorf("no sample StreamQuery %s under %s", name, samples)
		}
	}
}
