package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// documentSeparator splits a YAML stream into documents.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// document is one non-empty document of a YAML stream.
type document struct {
	index int // 1-based, among all documents of the stream
	meta  metav1.TypeMeta
	yaml  []byte
}

// documents splits the YAML stream b (read from the file named name) into
// its documents, skipping those with comments only, and reads each one's
// apiVersion and kind.
func documents(name string, b []byte) ([]document, error) {
	var out []document
	for i, doc := range documentSeparator.Split(string(b), -1) {
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue // comments only
		}
		d := document{index: i + 1, yaml: []byte(doc)}
		if err := yaml.Unmarshal(j, &d.meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// decodeStrict decodes YAML into v as the API server's strict field
// validation does: unknown and duplicate fields are errors, and field names
// match case-sensitively.
func decodeStrict(y []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(y)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, v, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
