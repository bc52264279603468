// Package hostile builds the encoded requests that tests send to prove the server bounds
// its work before it starts: nesting far deeper than any conversation, elements by the
// million, and malformed protobuf. Everything is built without recursion, in time and memory
// proportional to the encoding, so a test can build a request nested 100,000 levels deep.
package hostile

import (
	"bytes"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of compactor.v1 and google.protobuf.Struct that the builders use.
const (
	planMessages        = 1 // PlanRequest.messages
	messageRole         = 2 // Message.role
	messageParts        = 3 // Message.parts
	messageOptions      = 7 // Message.provider_options
	partText            = 1 // Part.text
	partToolResult      = 6 // Part.tool_result
	textText            = 1 // TextPart.text
	toolResultOutput    = 3 // ToolResultPart.output
	toolOutputContent   = 5 // ToolOutput.content
	toolContentParts    = 1 // ToolContent.parts
	mapKey, mapValue    = 1, 2
	structFields        = 1 // google.protobuf.Struct.fields
	valueStructValue    = 5 // google.protobuf.Value.struct_value
	valueStringValue    = 3 // google.protobuf.Value.string_value
	roleUser            = 2
	partLevelsPerNest   = 4 // Part → ToolResultPart → ToolOutput → ToolContent
	structLevelsPerNest = 3 // Struct → map entry → Value
)

// wrap is one level of nesting: a length-delimited field whose value starts with prefix and
// ends with the next level.
type wrap struct {
	field  protowire.Number
	prefix []byte
}

// nest encodes wraps, outermost first, around payload.
func nest(wraps []wrap, payload []byte) []byte {
	// Lengths from the inside out, then bytes from the outside in.
	lens := make([]int, len(wraps))
	inner := len(payload)
	for i := len(wraps) - 1; i >= 0; i-- {
		lens[i] = len(wraps[i].prefix) + inner
		inner = protowire.SizeTag(wraps[i].field) + protowire.SizeBytes(lens[i])
	}
	b := make([]byte, 0, inner)
	for i, w := range wraps {
		b = protowire.AppendTag(b, w.field, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(lens[i]))
		b = append(b, w.prefix...)
	}
	return append(b, payload...)
}

func field(num protowire.Number, value []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, value)
}

func textPart(s string) []byte {
	return field(partText, field(textText, []byte(s)))
}

// userRole is the role field of a user message.
var userRole = protowire.AppendVarint(protowire.AppendTag(nil, messageRole, protowire.VarintType), roleUser)

// NestedParts is a PlanRequest with one user message whose first part nests depth parts
// deep: Part → ToolResultPart → ToolOutput → ToolContent → Part …, the innermost a text.
// It takes about 16 bytes per level: 16 MiB hold a million.
func NestedParts(depth int) []byte {
	wraps := []wrap{{field: planMessages, prefix: userRole}, {field: messageParts}}
	for range depth {
		wraps = append(wraps,
			wrap{field: partToolResult}, wrap{field: toolResultOutput},
			wrap{field: toolOutputContent}, wrap{field: toolContentParts})
	}
	return nest(wraps, textPart("x"))
}

// NestedStruct is a PlanRequest with one user message holding a text part and provider
// options whose Struct nests depth levels: {"k": {"a": {"a": … "x"}}}.
func NestedStruct(depth int) []byte {
	parts := field(messageParts, textPart("hello"))
	wraps := []wrap{{field: planMessages, prefix: append(slices.Clone(userRole), parts...)},
		{field: messageOptions, prefix: field(mapKey, []byte("k"))}, {field: mapValue}}
	key := field(mapKey, []byte("a"))
	for i := range depth {
		if i > 0 {
			wraps = append(wraps, wrap{field: valueStructValue})
		}
		wraps = append(wraps, wrap{field: structFields, prefix: key}, wrap{field: mapValue})
	}
	return nest(wraps, field(valueStringValue, []byte("x")))
}

// EmptyMessages is a PlanRequest of n empty messages: two bytes each on the wire, a whole
// message struct each once decoded.
func EmptyMessages(n int) []byte {
	return bytes.Repeat([]byte{planMessages<<3 | byte(protowire.BytesType), 0}, n)
}

// Malformed are PlanRequests that are not protobuf, or not this message's, each named by
// what is wrong with it. The protobuf runtime refuses every one.
func Malformed() map[string][]byte {
	msg := field(planMessages, append(slices.Clone(userRole), field(messageParts, textPart("hi"))...))
	return map[string][]byte{
		"truncated tag":                         append(slices.Clone(msg), 0x80),
		"truncated length":                      append(slices.Clone(msg), planMessages<<3|2, 0x80),
		"length past the end":                   append(slices.Clone(msg), planMessages<<3|2, 0x7f, 0x0a),
		"negative length":                       append(slices.Clone(msg), planMessages<<3|2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"reserved wire type":                    append(slices.Clone(msg), planMessages<<3|6, 0x01),
		"field number zero":                     append(slices.Clone(msg), 0x02, 0x00),
		"unterminated group on a message field": append(slices.Clone(msg), planMessages<<3|3, messageRole<<3, 0x01),
		"end of a group never started":          append(slices.Clone(msg), planMessages<<3|4),
		"overlong varint":                       field(planMessages, append([]byte{messageRole << 3}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)),
		"inner truncation":                      field(planMessages, append(slices.Clone(userRole), messageParts<<3|2, 0x10, 0x0a)),
	}
}

// ForeignWireTypes are PlanRequests with a known field in a wire type not its own, each
// named by where: valid protobuf, which the protobuf runtime decodes by keeping that field
// as an unknown field (or, in a map entry, skipping it).
func ForeignWireTypes() map[string][]byte {
	msg := field(planMessages, append(slices.Clone(userRole), field(messageParts, textPart("hi"))...))
	with := func(inner ...[]byte) []byte { // a user message with inner after its role
		return field(planMessages, slices.Concat(append([][]byte{userRole}, inner...)...))
	}
	return map[string][]byte{
		"messages as a varint":     append(slices.Clone(msg), planMessages<<3, 0x01),
		"messages as a group":      append(slices.Clone(msg), planMessages<<3|3, messageRole<<3, 0x01, planMessages<<3|4),
		"role as length-delimited": with([]byte{messageRole<<3 | 2, 1, 0x01}),
		"text as a fixed32":        with(field(messageParts, field(partText, []byte{textText<<3 | 5, 'a', 'b', 'c', 'd'}))),
		"map key as a fixed64":     with(field(messageOptions, slices.Concat([]byte{mapKey<<3 | 1, 1, 2, 3, 4, 5, 6, 7, 8}, field(mapValue, nil)))),
		"Struct string value as a varint": with(field(messageOptions, slices.Concat(field(mapKey, []byte("k")),
			field(mapValue, field(structFields, slices.Concat(field(mapKey, []byte("f")), field(mapValue, []byte{valueStringValue << 3, 5}))))))),
	}
}
