// Command schemagen turns the Kubernetes OpenAPI v2 document into standalone, strict JSON
// Schemas laid out the way kubeconform looks them up, so manifests can be validated without
// network access.
//
// The input is api/openapi-spec/swagger.json from the k8s.io/kubernetes module, which
// `go mod download k8s.io/kubernetes@vX.Y.Z` fetches through the Go module proxy. For every
// definition carrying x-kubernetes-group-version-kind, schemagen writes
// {kind}{kindSuffix}.json (kind lower-cased; kindSuffix is "-{first label of the group}-{version}"
// or "-{version}" for the core group, exactly as kubeconform computes {{ .KindSuffix }}), so
// kubeconform finds them with
//
//	-schema-location '<out>/{{ .ResourceKind }}{{ .KindSuffix }}.json'
//
// Each file is self-contained ("standalone"): the definitions it references are copied into
// its own "definitions" section and referenced as "#/definitions/...", which also keeps
// recursive types (JSONSchemaProps) finite. Each file is strict: every object schema that
// lists its properties gets additionalProperties: false, so a misspelled field is rejected
// instead of silently ignored. Objects without listed properties (maps, RawExtension,
// FieldsV1) stay open. Quantity and IntOrString, which the API accepts as a string or a
// number, become oneOf schemas; kind and apiVersion are pinned with enums. Descriptions and
// x-kubernetes-* extensions are dropped: they do not affect validation and would triple the
// output size.
//
// Usage:
//
//	schemagen -spec $(go env GOMODCACHE)/k8s.io/kubernetes@v1.36.3/api/openapi-spec/swagger.json -out schemas/
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	spec := flag.String("spec", "", "path to the Kubernetes OpenAPI v2 document (swagger.json)")
	out := flag.String("out", "", "directory to write the schemas into (created if missing)")
	flag.Parse()
	if *spec == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: schemagen -spec swagger.json -out dir")
		os.Exit(2)
	}
	n, err := run(*spec, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "schemagen: wrote %d schemas to %s\n", n, *out)
}

// run converts the document at specPath and writes one file per schema into outDir. It
// returns the number of files written.
func run(specPath, outDir string) (int, error) {
	f, err := os.Open(specPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	files, err := convert(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", specPath, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return 0, err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(outDir, name), data, 0o644); err != nil {
			return 0, err
		}
	}
	return len(files), nil
}

// gvk is one entry of x-kubernetes-group-version-kind.
type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// apiVersion is the value a manifest carries in its apiVersion field.
func (g gvk) apiVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// fileName is the name kubeconform derives from {{ .ResourceKind }}{{ .KindSuffix }}.json
// (pkg/registry.schemaPath): the group is cut at its first dot.
func (g gvk) fileName() string {
	name := strings.ToLower(g.Kind)
	if g.Group == "" {
		return name + "-" + strings.ToLower(g.Version) + ".json"
	}
	group, _, _ := strings.Cut(g.Group, ".")
	return name + "-" + strings.ToLower(group) + "-" + strings.ToLower(g.Version) + ".json"
}

const refPrefix = "#/definitions/"

// overrides replace definitions whose OpenAPI v2 form is narrower than what the API server
// accepts.
var overrides = map[string]map[string]any{
	// "500m", "1Gi" and plain numbers (cpu: 1) are all valid quantities.
	"io.k8s.apimachinery.pkg.api.resource.Quantity": {
		"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}},
	},
	// Declared as a string with format int-or-string; ports and percentages use both forms.
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
		"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}},
	},
}

// convert reads a swagger document and returns the standalone strict schema files keyed by
// file name. Two different definitions that map to the same file name are an error, because
// kubeconform could then validate a resource against the wrong schema.
func convert(r io.Reader) (map[string][]byte, error) {
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if len(doc.Definitions) == 0 {
		return nil, errors.New("no definitions: not an OpenAPI v2 document")
	}

	defs := make(map[string]map[string]any, len(doc.Definitions))
	for name, raw := range doc.Definitions {
		if o, ok := overrides[name]; ok {
			defs[name] = o
			continue
		}
		s, err := strictSchema(raw)
		if err != nil {
			return nil, fmt.Errorf("definition %s: %w", name, err)
		}
		defs[name] = s
	}

	names := make([]string, 0, len(doc.Definitions))
	for name := range doc.Definitions {
		names = append(names, name)
	}
	sort.Strings(names)

	files := map[string][]byte{}
	owner := map[string]string{} // file name -> definition name
	for _, name := range names {
		gvks, err := groupVersionKinds(doc.Definitions[name])
		if err != nil {
			return nil, fmt.Errorf("definition %s: %w", name, err)
		}
		for _, g := range gvks {
			file := g.fileName()
			if prev, dup := owner[file]; dup {
				if prev == name {
					continue
				}
				return nil, fmt.Errorf("%s and %s both map to %s", prev, name, file)
			}
			owner[file] = name
			data, err := standalone(name, g, defs)
			if err != nil {
				return nil, err
			}
			files[file] = data
		}
	}
	if len(files) == 0 {
		return nil, errors.New("no definition carries x-kubernetes-group-version-kind")
	}
	return files, nil
}

// groupVersionKinds decodes a definition's x-kubernetes-group-version-kind list.
func groupVersionKinds(def map[string]any) ([]gvk, error) {
	raw, ok := def["x-kubernetes-group-version-kind"]
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var out []gvk
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("x-kubernetes-group-version-kind: %w", err)
	}
	return out, nil
}

// strictSchema copies a schema without descriptions and vendor extensions, closing every
// object that lists its properties.
func strictSchema(in map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(in))
	for k, v := range in {
		switch {
		case k == "description" || strings.HasPrefix(k, "x-"):
			continue
		case k == "properties" || k == "patternProperties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s is not an object", k)
			}
			cp := make(map[string]any, len(props))
			for name, p := range props {
				ps, ok := p.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("%s.%s is not a schema", k, name)
				}
				s, err := strictSchema(ps)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", k, name, err)
				}
				cp[name] = s
			}
			out[k] = cp
		case k == "items" || k == "additionalProperties" || k == "not":
			if s, ok := v.(map[string]any); ok {
				c, err := strictSchema(s)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				out[k] = c
			} else {
				out[k] = v // additionalProperties: true/false
			}
		case k == "allOf" || k == "anyOf" || k == "oneOf":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s is not a list", k)
			}
			cp := make([]any, len(list))
			for i, e := range list {
				s, ok := e.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("%s[%d] is not a schema", k, i)
				}
				c, err := strictSchema(s)
				if err != nil {
					return nil, fmt.Errorf("%s[%d]: %w", k, i, err)
				}
				cp[i] = c
			}
			out[k] = cp
		case k == "$ref":
			ref, ok := v.(string)
			if !ok || !strings.HasPrefix(ref, refPrefix) {
				return nil, fmt.Errorf("unsupported $ref %v", v)
			}
			out[k] = ref
		default:
			out[k] = v
		}
	}
	if _, hasProps := out["properties"]; hasProps {
		if _, set := out["additionalProperties"]; !set {
			out["additionalProperties"] = false
		}
	}
	return out, nil
}

// standalone builds the schema file for one kind: the definition itself at the root, with
// kind and apiVersion pinned, plus every definition it reaches under "definitions".
func standalone(name string, g gvk, defs map[string]map[string]any) ([]byte, error) {
	root := make(map[string]any, len(defs[name])+2)
	for k, v := range defs[name] {
		root[k] = v
	}
	props, _ := root["properties"].(map[string]any)
	if props == nil {
		return nil, fmt.Errorf("definition %s (%s) has no properties", name, g.Kind)
	}
	pinned := make(map[string]any, len(props))
	for k, v := range props {
		pinned[k] = v
	}
	pinned["kind"] = map[string]any{"type": "string", "enum": []any{g.Kind}}
	pinned["apiVersion"] = map[string]any{"type": "string", "enum": []any{g.apiVersion()}}
	root["properties"] = pinned

	reached := map[string]any{}
	queue := []string{name}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		var refs []string
		collectRefs(defs[cur], &refs)
		for _, ref := range refs {
			target := strings.TrimPrefix(ref, refPrefix)
			if _, seen := reached[target]; seen {
				continue
			}
			def, ok := defs[target]
			if !ok {
				return nil, fmt.Errorf("definition %s: dangling $ref %s", cur, ref)
			}
			reached[target] = def
			queue = append(queue, target)
		}
	}
	if len(reached) > 0 {
		root["definitions"] = reached
	}
	root["$schema"] = "http://json-schema.org/draft-04/schema#"

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encode %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// collectRefs appends every $ref found anywhere in v.
func collectRefs(v any, refs *[]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if s, ok := e.(string); ok && k == "$ref" {
				*refs = append(*refs, s)
				continue
			}
			collectRefs(e, refs)
		}
	case []any:
		for _, e := range t {
			collectRefs(e, refs)
		}
	}
}
