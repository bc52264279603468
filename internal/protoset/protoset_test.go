package protoset

import (
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protodesc"
)

// TestBuild: every file once, after its imports, and the set resolves on its own (protodesc
// rejects a set with a missing or misplaced import).
func TestBuild(t *testing.T) {
	set := Build(compactorv1.File_compactor_v1_compactor_proto, healthpb.File_grpc_health_v1_health_proto,
		compactorv1.File_compactor_v1_compactor_proto)
	seen := map[string]int{}
	for i, f := range set.File {
		if _, dup := seen[f.GetName()]; dup {
			t.Errorf("%s appears twice", f.GetName())
		}
		seen[f.GetName()] = i
		for _, dep := range f.GetDependency() {
			if j, ok := seen[dep]; !ok || j >= i {
				t.Errorf("%s comes before its import %s", f.GetName(), dep)
			}
		}
	}
	for _, want := range []string{"compactor/v1/compactor.proto", "compactor/v1/conversation.proto",
		"grpc/health/v1/health.proto", "google/protobuf/struct.proto"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("the set lacks %s (has %v)", want, seen)
		}
	}
	if _, err := protodesc.NewFiles(set); err != nil {
		t.Errorf("the set does not resolve: %v", err)
	}
}
