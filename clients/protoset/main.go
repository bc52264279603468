// Command protoset writes the FileDescriptorSet the client generators read: the compactor.v1
// API, google.rpc.Status and google.rpc's error details (BadRequest, QuotaFailure,
// RetryInfo, ErrorInfo: what compactord's errors carry), with every file they import.
// Taking the google.rpc descriptors from the Go module that compactord itself links keeps
// the clients' error types identical to the server's, with no .proto files to vendor.
//
//	go run ./clients/protoset -o descriptors.binpb
package main

import (
	"flag"
	"fmt"
	"os"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	out := flag.String("o", "", "output file (required)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "protoset: -o is required")
		os.Exit(2)
	}
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	for _, fd := range []protoreflect.FileDescriptor{
		compactorv1.File_compactor_v1_compactor_proto,
		status.File_google_rpc_status_proto,
		errdetails.File_google_rpc_error_details_proto,
	} {
		add(fd)
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
