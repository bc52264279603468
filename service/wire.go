package service

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Decoding limits. A request is checked against them on the wire, in one pass without
// recursion, before the generated decoder (which recurses once per nested message) runs.
const (
	// MaxDecodeDepth bounds how deep a request nests: every message of the request tree is
	// one level (PlanRequest → Message → Part → ToolResultPart → ToolOutput → ToolContent →
	// Part …), and a google.protobuf.Struct one level per JSON level (its map entries and
	// Value wrappers are not counted). A valid conversation nests 7 levels plus its
	// provider options.
	MaxDecodeDepth = 64
	// DecodeCostMultiple bounds the memory a decoded request may take, as a multiple of its
	// encoded size (the message structs, slices, map slots and oneof wrappers decoding
	// allocates; strings and bytes point into the request's own buffer and cost nothing
	// more, unless the request decodes through the protobuf runtime, which copies them:
	// decoding.foreign). A conversation of short text messages decodes to about 25×; the elements of a
	// hostile request (a million empty messages) to 40–72×.
	DecodeCostMultiple = 32
	// MinDecodeCost is the decoded size every request may reach whatever its encoded size,
	// so that small requests of small messages are never refused.
	MinDecodeCost = 1 << 20
)

// Estimates of the memory a decoded request keeps besides each message struct (what
// decoding allocates and then drops, the smaller arrays of a growing slice, the collector
// reclaims).
const (
	slotCost     = 16  // a pointer in a slice grown by doubling: up to twice its 8 bytes
	stringSlot   = 32  // a string header in a growing slice
	bytesSlot    = 48  // a []byte header in a growing slice
	oneofCost    = 16  // the wrapper a oneof member is allocated in, rounded to its size class
	mapCost      = 320 // a map with its first group of 8 slots
	mapEntryCost = 64  // a map slot (key, value, control byte), at most half empty after growth
	scalarSlot   = 16  // a number in a growing slice
)

// copyCost is what the protobuf runtime allocates to copy a string or bytes value of n
// bytes (a decoding.foreign request decodes through it): n rounded up to the allocator's
// size class, which wastes under a quarter of n plus 16 bytes.
func copyCost(n int) int64 { return int64(n) + int64(n)/4 + 16 }

// decoding is what check found an encoded message's decoding takes.
type decoding struct {
	// cost is what decoding allocates and keeps, in bytes.
	cost int64
	// foreign: a known field arrives in a wire type not its own (a message as a group or a
	// varint, a string as a fixed32, a packed singular number). The protobuf runtime
	// decodes such a field as an unknown field; vtprotobuf's generated decoder refuses it,
	// so the message decodes through the runtime, which copies its strings (in cost).
	foreign bool
}

// wireSchema is what the checker needs of a message type: its fields by number, how many
// depth levels one of its messages counts, and the bytes decoding one allocates.
type wireSchema struct {
	dense  []wireField // by field number, for the common small numbers
	sparse map[protowire.Number]*wireField
	weight int   // depth levels; 0 for map entries and google.protobuf.Value
	size   int64 // bytes of its Go struct, rounded up to the allocator's 16
}

// wireField is a field of a wireSchema. The zero wireField is an unknown number. A known
// field in a wire type not its own is an unknown field, as the protobuf runtime reads it.
type wireField struct {
	name   string
	wire   uint8       // the wire types it may arrive in, as a bit set (1 << protowire.Type)
	list   bool        // repeated or map: paths index it
	isMap  bool        // a map: its first entry in a message allocates the map
	utf8   bool        // a string that must be UTF-8
	packed bool        // repeated numbers, which may arrive packed
	inner  *wireSchema // a message or map entry to look into
	cost   int64       // bytes each occurrence costs when decoded, besides inner.size
}

// maxDense bounds the field numbers kept in a wireSchema's slice.
const maxDense = 256

// schemas holds the wireSchema of every message type the server decodes, built once.
var schemas sync.Map // protoreflect.FullName → *wireSchema

// schemaOf returns the wireSchema of md.
func schemaOf(md protoreflect.MessageDescriptor) *wireSchema {
	if s, ok := schemas.Load(md.FullName()); ok {
		return s.(*wireSchema)
	}
	built := make(map[protoreflect.FullName]*wireSchema)
	s := buildSchema(md, built)
	for name, bs := range built {
		schemas.LoadOrStore(name, bs) // racing builders store equivalent tables
	}
	return s
}

// buildSchema builds the table of md and of every message type reachable from it into
// built, which also breaks the cycles of recursive types.
func buildSchema(md protoreflect.MessageDescriptor, built map[protoreflect.FullName]*wireSchema) *wireSchema {
	if s, ok := built[md.FullName()]; ok {
		return s
	}
	s := &wireSchema{weight: 1, size: structSize(md)}
	if md.IsMapEntry() || md.FullName() == "google.protobuf.Value" {
		s.weight = 0
	}
	built[md.FullName()] = s
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := wireField{name: string(fd.Name()), list: fd.IsList() || fd.IsMap()}
		oneof := fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic()
		switch fd.Kind() {
		case protoreflect.MessageKind, protoreflect.GroupKind:
			f.wire = 1 << protowire.BytesType
			f.inner = buildSchema(fd.Message(), built)
			switch {
			case fd.IsMap():
				f.cost, f.isMap = mapEntryCost, true
			case fd.IsList():
				f.cost = slotCost
			case oneof:
				f.cost = oneofCost
			}
		case protoreflect.StringKind, protoreflect.BytesKind:
			f.wire = 1 << protowire.BytesType
			f.utf8 = fd.Kind() == protoreflect.StringKind && enforcesUTF8(fd)
			switch {
			case fd.IsList() && fd.Kind() == protoreflect.StringKind:
				f.cost = stringSlot
			case fd.IsList():
				f.cost = bytesSlot
			case oneof:
				f.cost = oneofCost
			}
		default:
			f.wire = 1 << scalarWireType(fd.Kind())
			switch {
			case fd.IsList():
				f.wire |= 1 << protowire.BytesType
				f.packed = true
				f.cost = scalarSlot
			case oneof:
				f.cost = oneofCost
			}
		}
		if n := fd.Number(); n < maxDense {
			if int(n) >= len(s.dense) {
				s.dense = append(s.dense, make([]wireField, int(n)+1-len(s.dense))...)
			}
			s.dense[n] = f
		} else {
			if s.sparse == nil {
				s.sparse = make(map[protowire.Number]*wireField)
			}
			s.sparse[n] = &f
		}
	}
	return s
}

// structSize is the size of md's generated Go struct, rounded up to 16; 0 for a map entry,
// which decodes into a map slot (counted by its field) rather than a struct.
func structSize(md protoreflect.MessageDescriptor) int64 {
	if md.IsMapEntry() {
		return 0
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		return 128 // not linked in: a typical message's size
	}
	size := int64(reflect.TypeOf(mt.Zero().Interface()).Elem().Size())
	return (size + 15) &^ 15
}

// scalarWireType is the wire type a scalar field of kind k is encoded in.
func scalarWireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	}
	return protowire.VarintType
}

// enforcesUTF8 reports whether the protobuf runtime rejects a non-UTF-8 value of the string
// field fd: in proto3 files, and in editions files unless the field's features say otherwise.
func enforcesUTF8(fd protoreflect.FieldDescriptor) bool {
	if e, ok := fd.(interface{ EnforceUTF8() bool }); ok {
		return e.EnforceUTF8()
	}
	return fd.ParentFile().Syntax() == protoreflect.Proto3
}

// field returns field n of s; the zero wireField when s has none.
func (s *wireSchema) field(n protowire.Number) *wireField {
	if int(n) < len(s.dense) {
		return &s.dense[n]
	}
	if f := s.sparse[n]; f != nil {
		return f
	}
	return &unknownField
}

var unknownField wireField

// Kinds of wire problems.
const (
	problemNone      = iota
	problemMalformed // not protobuf, or not this message's protobuf
	problemUTF8      // a string field that is not UTF-8
	problemDepth     // nested deeper than MaxDecodeDepth
	problemCost      // would decode to more than its cost bound
)

// problem is what check found wrong with an encoded message: its kind, the offset in the
// message where it lies (for the field path), and for malformed input what is wrong.
type problem struct {
	kind int
	off  int
	what string
}

// wireFrame is a message check has entered: its schema, where it ends, and whether it has
// allocated its map yet (the messages of compactor.v1 and google.protobuf.Struct have one
// map field at most).
type wireFrame struct {
	s      *wireSchema
	end    int
	mapped bool
}

// check walks b, an encoded message of schema s, with an explicit stack (no recursion,
// whatever the nesting): it checks the wire format (tags, varints, lengths, the wire type of
// every field), the depth (at most maxDepth), that every string field that must be UTF-8
// is, and sums what decoding b would allocate, stopping as soon as that passes maxCost. It
// accepts what the protobuf runtime accepts within those limits, a known field in a wire
// type not its own included (see decoding.foreign). It returns what decoding takes and the
// first problem found.
func (s *wireSchema) check(b []byte, maxDepth int, maxCost int64) (d decoding, p problem) {
	var stackArr [16]wireFrame
	stack := stackArr[:0]
	cur, end, mapped := s, len(b), false
	depth := s.weight
	d.cost = s.size
	var copies int64 // what the runtime's copies of the strings so far would take
	i := 0
	for {
		if i >= end {
			if len(stack) == 0 {
				return d, problem{}
			}
			depth -= cur.weight
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			cur, end, mapped = top.s, top.end, top.mapped
			continue
		}
		start := i
		var tag uint64
		if c := b[i]; c < 0x80 {
			tag = uint64(c)
			i++
		} else {
			v, n := protowire.ConsumeVarint(b[i:end])
			if n < 0 {
				return d, problem{problemMalformed, start, "truncated or overlong tag"}
			}
			tag, i = v, i+n
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		if num < protowire.MinValidNumber || tag>>3 > uint64(protowire.MaxValidNumber) {
			return d, problem{problemMalformed, start, "invalid field number " + strconv.FormatUint(tag>>3, 10)}
		}
		f := cur.field(num)
		if f.wire&(1<<typ) == 0 { // unknown: kept byte for byte by the decoder, groups included
			if f.wire != 0 && !d.foreign { // a known field in a foreign wire type
				d.foreign, d.cost = true, d.cost+copies
			}
			n := protowire.ConsumeFieldValue(num, typ, b[i:end])
			if n < 0 {
				return d, problem{problemMalformed, start, "malformed field " + strconv.FormatUint(tag>>3, 10) + " (" + wireTypeName(typ) + ")"}
			}
			i += n
			n = i - start
			if d.cost += 2 * int64(n); d.cost > maxCost { // appended to a growing slice
				return d, problem{problemCost, start, ""}
			}
			continue
		}
		switch typ {
		case protowire.VarintType:
			j := i
			for j < end && b[j] >= 0x80 {
				j++
			}
			switch {
			case j == end:
				return d, problem{problemMalformed, start, "truncated varint"}
			case j-i > 9 || j-i == 9 && b[j] > 1:
				return d, problem{problemMalformed, start, "varint overflows 64 bits"}
			}
			i = j + 1
		case protowire.Fixed32Type:
			if end-i < 4 {
				return d, problem{problemMalformed, start, "truncated fixed32"}
			}
			i += 4
		case protowire.Fixed64Type:
			if end-i < 8 {
				return d, problem{problemMalformed, start, "truncated fixed64"}
			}
			i += 8
		case protowire.BytesType:
			var size uint64
			if i < end && b[i] < 0x80 {
				size = uint64(b[i])
				i++
			} else {
				l, n := protowire.ConsumeVarint(b[i:end])
				if n < 0 {
					return d, problem{problemMalformed, start, "truncated length"}
				}
				size, i = l, i+n
			}
			if size > uint64(end-i) {
				return d, problem{problemMalformed, start, "length " + strconv.FormatUint(size, 10) + " past the end of the message"}
			}
			n := int(size)
			switch {
			case f.inner != nil:
				d.cost += f.cost + f.inner.size
				if f.isMap && !mapped {
					d.cost, mapped = d.cost+mapCost, true
				}
				if depth += f.inner.weight; depth > maxDepth {
					return d, problem{problemDepth, start, ""}
				}
				if d.cost > maxCost {
					return d, problem{problemCost, start, ""}
				}
				stack = append(stack, wireFrame{cur, end, mapped})
				cur, end, mapped = f.inner, i+n, false
				continue
			case f.utf8 && !utf8.Valid(b[i:i+n]):
				return d, problem{problemUTF8, i, ""}
			case f.packed:
				if !packedValid(b[i:i+n], f.wire) {
					return d, problem{problemMalformed, start, "malformed packed numbers"}
				}
				d.cost += scalarSlot * int64(n)
			default:
				d.cost += f.cost
				if d.foreign {
					d.cost += copyCost(n)
				} else {
					copies += copyCost(n)
				}
			}
			i += n
		}
		if typ != protowire.BytesType {
			d.cost += f.cost
		}
		if d.cost > maxCost {
			return d, problem{problemCost, start, ""}
		}
	}
}

// packedValid reports whether b is a whole number of packed values of the scalar wire type
// in wire (a wireField's set, the length-delimited bit aside).
func packedValid(b []byte, wire uint8) bool {
	switch {
	case wire&(1<<protowire.Fixed32Type) != 0:
		return len(b)%4 == 0
	case wire&(1<<protowire.Fixed64Type) != 0:
		return len(b)%8 == 0
	}
	for len(b) > 0 {
		_, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

func wireTypeName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	case protowire.BytesType:
		return "length-delimited"
	case protowire.StartGroupType:
		return "start-group"
	case protowire.EndGroupType:
		return "end-group"
	}
	return strconv.Itoa(int(t))
}

// pathAt returns the path of the field of b (an encoded message of schema s) that holds
// offset off, like "messages[3].parts[0].text.text": each repeated field is indexed, an
// unknown field is named by its number, and a path deeper than maxPathParts fields is
// shortened in the middle. It walks b again from the start, without recursion; it runs only to
// report a problem.
func (s *wireSchema) pathAt(b []byte, off int) string {
	var parts []string
	cur, start, end := s, 0, len(b)
	for {
		seen := make(map[protowire.Number]int)
		next := false
		for i := start; i < end; {
			num, typ, n := protowire.ConsumeTag(b[i:end])
			if n < 0 {
				return joinPath(parts)
			}
			vstart := i + n
			vlen := skipValue(typ, b[vstart:end])
			f := cur.field(num)
			name := f.name
			if f.wire == 0 {
				name = "unknown field " + strconv.Itoa(int(num))
			}
			if f.list {
				name += "[" + strconv.Itoa(seen[num]) + "]"
				seen[num]++
			}
			if vlen < 0 || off < vstart+vlen {
				parts = append(parts, name)
				_, ln := protowire.ConsumeVarint(b[vstart:end])
				if vlen < 0 || f.inner == nil || typ != protowire.BytesType || off < vstart+ln {
					return joinPath(parts) // off is in this field's tag or length, or it holds no message
				}
				cur, start, end = f.inner, vstart+ln, vstart+vlen
				next = true
				break
			}
			i = vstart + vlen
		}
		if !next {
			return joinPath(parts)
		}
	}
}

// skipValue is the length of the value of wire type typ at the start of b, -1 when it is
// malformed or a group (which pathAt does not enter).
func skipValue(typ protowire.Type, b []byte) int {
	switch typ {
	case protowire.VarintType:
		_, n := protowire.ConsumeVarint(b)
		return n
	case protowire.Fixed32Type:
		_, n := protowire.ConsumeFixed32(b)
		return n
	case protowire.Fixed64Type:
		_, n := protowire.ConsumeFixed64(b)
		return n
	case protowire.BytesType:
		_, n := protowire.ConsumeBytes(b)
		return n
	}
	return -1
}

// maxPathParts bounds the fields a reported path names (a valid request's deepest paths
// have about 16): a path deeper than that keeps its first and last fields and says how many
// it left out.
const maxPathParts = 32

// joinPath joins the fields of a path with dots; "request" for the message itself.
func joinPath(parts []string) string {
	if len(parts) == 0 {
		return "request"
	}
	if len(parts) > maxPathParts {
		head, tail := parts[:maxPathParts-6], parts[len(parts)-6:]
		return strings.Join(head, ".") + fmt.Sprintf(".….(%d more levels)….", len(parts)-maxPathParts) + strings.Join(tail, ".")
	}
	return strings.Join(parts, ".")
}
