package compactorv1

// This file is written by hand; `make generate` leaves it alone. It gives the engine's content
// hash direct access to the unknown fields of the conversation messages (fields a newer
// schema added, kept byte-exact by the decoder), which ProtoReflect().GetUnknown() returns
// only through several indirect calls. It compiles only while the generated structs keep
// their unknownFields field of type []byte; TestUnknownFieldsMatchesProtoReflect checks that
// each accessor returns what ProtoReflect().GetUnknown() does.

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *Message) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *Part) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *TextPart) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ImagePart) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *FilePart) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ReasoningPart) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ToolCallPart) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ToolResultPart) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ToolOutput) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ToolContent) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ToolApprovalRequest) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ToolApprovalResponse) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}

// UnknownFields returns the raw unknown fields of x (nil for a nil x). The caller must not
// modify the result.
func (x *ProviderPart) UnknownFields() []byte {
	if x == nil {
		return nil
	}
	return x.unknownFields
}
