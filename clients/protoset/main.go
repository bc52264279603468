// Command protoset writes the FileDescriptorSet the client generators read: the compactor.v1
// API, google.rpc.Status and google.rpc's error details (BadRequest, QuotaFailure,
// RetryInfo, ErrorInfo: what compactord's errors carry), with every file they import.
// Taking the google.rpc descriptors from the Go module that compactord itself links keeps
// the clients' error types identical to the server's, with no .proto files to vendor.
//
// The API's files import google/api/field_behavior.proto for their fields' annotations; the
// set holds it too (from the same Go module), so the Node client gets a copy of its own.
//
// With -private-rpc, the set is Python's, whose generated modules register their files in one
// process-wide pool and import google.* modules from googleapis-common-protos, which Debian 12
// does not package: the google.rpc files become compactord/rpc/*.proto in package
// compactord.rpc (a second google/rpc/status.proto, when googleapis-common-protos is
// installed, would fail to import; the messages keep their fields, so their bytes are the
// same), and google/api/field_behavior.proto is left out. The annotations stay in the API's
// field options as the same bytes, an extension Python reads once google.api.field_behavior_pb2
// is imported, and an unknown field otherwise.
//
//	go run ./clients/protoset -o descriptors.binpb [-private-rpc]
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/protoset"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	out := flag.String("o", "", "output file (required)")
	private := flag.Bool("private-rpc", false, "rename the google.rpc files and package to compactord/rpc and compactord.rpc, and leave out google/api/field_behavior.proto (Python)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "protoset: -o is required")
		os.Exit(2)
	}
	set := protoset.Build(
		compactorv1.File_compactor_v1_compactor_proto,
		status.File_google_rpc_status_proto,
		errdetails.File_google_rpc_error_details_proto,
	)
	if *private {
		privatize(set)
		leaveOut(set, annotations.File_google_api_field_behavior_proto)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "protoset:", err)
		os.Exit(1)
	}
}

// privatize moves the google.rpc files to compactord/rpc/ and package compactord.rpc,
// renaming every reference to their types.
func privatize(set *descriptorpb.FileDescriptorSet) {
	const from, to = "google.rpc", "compactord.rpc"
	for _, f := range set.File {
		if f.GetPackage() != from {
			continue
		}
		f.Name = proto.String(strings.Replace(f.GetName(), "google/rpc/", "compactord/rpc/", 1))
		f.Package = proto.String(to)
		f.Options = nil // go_package and the like name the original
		var rename func(ms []*descriptorpb.DescriptorProto)
		rename = func(ms []*descriptorpb.DescriptorProto) {
			for _, m := range ms {
				for _, fld := range m.Field {
					if strings.HasPrefix(fld.GetTypeName(), "."+from+".") {
						fld.TypeName = proto.String("." + to + strings.TrimPrefix(fld.GetTypeName(), "."+from))
					}
				}
				rename(m.NestedType)
			}
		}
		rename(f.MessageType)
	}
}

// leaveOut removes fd from the set, and the imports of it, then every file nothing left
// imports that only fd did (descriptor.proto). Options that use its extensions keep their
// bytes: a reader without fd's definitions keeps them as unknown fields.
func leaveOut(set *descriptorpb.FileDescriptorSet, fd protoreflect.FileDescriptor) {
	drop := map[string]bool{fd.Path(): true}
	imports := fd.Imports()
	for i := range imports.Len() {
		drop[imports.Get(i).Path()] = true
	}
	for _, f := range set.File {
		if drop[f.GetName()] {
			continue
		}
		for _, dep := range f.GetDependency() {
			if dep != fd.Path() {
				delete(drop, dep) // still imported
			}
		}
		f.Dependency = slices.DeleteFunc(f.Dependency, func(dep string) bool { return dep == fd.Path() })
	}
	set.File = slices.DeleteFunc(set.File, func(f *descriptorpb.FileDescriptorProto) bool { return drop[f.GetName()] })
}
