package pipeline

import (
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// Parse reads a pipeline from YAML or JSON: the pipeline itself, or a
// document whose only top-level key is `pipeline`. Unknown fields are
// errors, so that a misspelt field is not silently ignored.
func Parse(doc []byte) (v1.Pipeline, error) {
	var p v1.Pipeline
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return p, fmt.Errorf("parse pipeline: %w", err)
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) == nil && len(top) == 1 && top["pipeline"] != nil {
		js = top["pipeline"]
	}
	if err := yaml.UnmarshalStrict(js, &p); err != nil {
		return p, fmt.Errorf("parse pipeline: %w", err)
	}
	return p, nil
}

// Load reads and compiles the pipeline in file.
func Load(file string) (*Program, error) {
	doc, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read pipeline: %w", err)
	}
	spec, err := Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	p, err := Compile(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}
