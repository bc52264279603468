package compactorv1

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestUnknownFieldsMatchesProtoReflect checks each hand-written accessor against the
// generated reflection: with and without unknown fields, and on a nil message.
func TestUnknownFieldsMatchesProtoReflect(t *testing.T) {
	unknown := protoreflect.RawFields{0xf8, 0x07, 0x2a} // field 127, varint 42
	for _, tt := range []struct {
		msg interface {
			proto.Message
			UnknownFields() []byte
		}
		nilMsg interface{ UnknownFields() []byte }
	}{
		{&Message{}, (*Message)(nil)},
		{&Part{}, (*Part)(nil)},
		{&TextPart{}, (*TextPart)(nil)},
		{&ImagePart{}, (*ImagePart)(nil)},
		{&FilePart{}, (*FilePart)(nil)},
		{&ReasoningPart{}, (*ReasoningPart)(nil)},
		{&ToolCallPart{}, (*ToolCallPart)(nil)},
		{&ToolResultPart{}, (*ToolResultPart)(nil)},
		{&ToolOutput{}, (*ToolOutput)(nil)},
		{&ToolContent{}, (*ToolContent)(nil)},
		{&ToolApprovalRequest{}, (*ToolApprovalRequest)(nil)},
		{&ToolApprovalResponse{}, (*ToolApprovalResponse)(nil)},
		{&ProviderPart{}, (*ProviderPart)(nil)},
	} {
		name := string(tt.msg.ProtoReflect().Descriptor().Name())
		if got := tt.msg.UnknownFields(); len(got) != 0 {
			t.Errorf("%s: UnknownFields() = %x on a new message", name, got)
		}
		tt.msg.ProtoReflect().SetUnknown(unknown)
		if got, want := tt.msg.UnknownFields(), tt.msg.ProtoReflect().GetUnknown(); !bytes.Equal(got, want) || len(got) == 0 {
			t.Errorf("%s: UnknownFields() = %x, ProtoReflect().GetUnknown() = %x", name, got, want)
		}
		// A decoded message keeps what it does not know.
		wire, err := proto.Marshal(tt.msg)
		if err != nil {
			t.Fatal(err)
		}
		decoded := tt.msg.ProtoReflect().New().Interface().(interface {
			proto.Message
			UnknownFields() []byte
		})
		if err := proto.Unmarshal(wire, decoded); err != nil {
			t.Fatal(err)
		}
		if got := decoded.UnknownFields(); !bytes.Equal(got, unknown) {
			t.Errorf("%s: decoded UnknownFields() = %x, want %x", name, got, unknown)
		}
		if got := tt.nilMsg.UnknownFields(); got != nil {
			t.Errorf("%s: UnknownFields() on nil = %x", name, got)
		}
	}
}
