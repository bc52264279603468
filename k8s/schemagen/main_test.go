package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func convertFixture(t *testing.T) map[string]map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, err := convert(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for name, data := range files {
		var s map[string]any
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = s
	}
	return out
}

// lookup walks a decoded schema along keys.
func lookup(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("at %q: not an object", k)
		}
		v, ok = m[k]
		if !ok {
			t.Fatalf("key %q missing", k)
		}
	}
	return v
}

func TestConvertNamesFilesLikeKubeconform(t *testing.T) {
	got := convertFixture(t)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"gadget-v1.json", "widget-apps-v1.json"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("files = %v, want %v", names, want)
	}
}

func TestConvertClosesObjectsWithProperties(t *testing.T) {
	w := convertFixture(t)["widget-apps-v1.json"]
	spec := "io.k8s.api.apps.v1.WidgetSpec"
	tests := []struct {
		name string
		path []string
		want any
	}{
		{"root", []string{"additionalProperties"}, false},
		{"referenced definition", []string{"definitions", spec, "additionalProperties"}, false},
		{"metadata", []string{"definitions", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "additionalProperties"}, false},
		{"map stays a map", []string{"definitions", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "properties", "labels", "additionalProperties"}, map[string]any{"type": "string"}},
		{"kind pinned", []string{"properties", "kind", "enum"}, []any{"Widget"}},
		{"apiVersion pinned", []string{"properties", "apiVersion", "enum"}, []any{"apps/v1"}},
		{"recursive ref stays local", []string{"definitions", spec, "properties", "children", "items", "$ref"}, "#/definitions/" + spec},
		{"required kept", []string{"definitions", spec, "required"}, []any{"size"}},
		{"quantity accepts numbers", []string{"definitions", "io.k8s.apimachinery.pkg.api.resource.Quantity", "oneOf"},
			[]any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}},
		{"int-or-string accepts integers", []string{"definitions", "io.k8s.apimachinery.pkg.util.intstr.IntOrString", "oneOf"},
			[]any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}},
		{"property named description survives", []string{"definitions", spec, "properties", "description"}, map[string]any{"type": "string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lookup(t, w, tt.path...); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s = %#v, want %#v", strings.Join(tt.path, "."), got, tt.want)
			}
		})
	}

	raw := lookup(t, w, "definitions", spec, "properties", "raw").(map[string]any)
	if _, closed := raw["additionalProperties"]; closed {
		t.Errorf("an object without listed properties must stay open, got %v", raw)
	}
	if _, ok := w["description"]; ok {
		t.Error("descriptions must be dropped")
	}
	if _, ok := w["x-kubernetes-group-version-kind"]; ok {
		t.Error("vendor extensions must be dropped")
	}
	defs := lookup(t, w, "definitions").(map[string]any)
	if _, ok := defs["io.k8s.api.unused.v1.Orphan"]; ok {
		t.Error("unreferenced definitions must not be copied")
	}
	if _, ok := convertFixture(t)["gadget-v1.json"]["definitions"]; ok {
		t.Error("a schema without references needs no definitions section")
	}
}

func TestConvertRejects(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"not swagger", `{"openapi": "3.0.0"}`, "no definitions"},
		{"no kinds", `{"definitions": {"a.B": {"type": "object"}}}`, "no definition carries"},
		{"dangling ref", `{"definitions": {"a.B": {"type": "object", "properties": {"x": {"$ref": "#/definitions/missing"}},
			"x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "B"}]}}}`, "dangling"},
		{"external ref", `{"definitions": {"a.B": {"type": "object", "properties": {"x": {"$ref": "other.json#/x"}}}}}`, "unsupported $ref"},
		{"file name collision", `{"definitions": {
			"a.B": {"type": "object", "properties": {"kind": {"type": "string"}}, "x-kubernetes-group-version-kind": [{"group": "x.one.io", "version": "v1", "kind": "B"}]},
			"c.B": {"type": "object", "properties": {"kind": {"type": "string"}}, "x-kubernetes-group-version-kind": [{"group": "x.two.io", "version": "v1", "kind": "B"}]}}}`,
			"both map to b-x-v1.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := convert(strings.NewReader(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("convert() error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRunWritesFiles(t *testing.T) {
	dir := t.TempDir()
	n, err := run(filepath.Join("testdata", "swagger.json"), filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(entries) != 2 {
		t.Fatalf("run wrote %d (reported %d), want 2", len(entries), n)
	}
}
