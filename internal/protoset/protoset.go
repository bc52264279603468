// Package protoset builds a FileDescriptorSet from descriptors compiled into the binary: the
// files named and every file they import, each once, every file after its imports. It is
// the one builder of the sets compactord hands to other tools: clients/protoset writes one
// for the client generators, and the load test gives one to ghz, which then needs neither
// reflection nor .proto files.
package protoset

import (
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Build returns the set of files and their transitive imports, in dependency order (a file
// after every file it imports; otherwise in the order given).
func Build(files ...protoreflect.FileDescriptor) *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	for _, fd := range files {
		add(fd)
	}
	return set
}
