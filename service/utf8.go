package service

import (
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// utf8Checker finds string fields that are not UTF-8 in encoded messages, at any depth, as
// the protobuf runtime rejects them when it decodes proto3 and editions strings. It walks the
// wire format with a table per message type built once from the descriptors, so a check costs
// a pass over the tags and the bytes of the strings. The zero value is ready to use and safe
// for concurrent use.
type utf8Checker struct {
	schemas sync.Map // protoreflect.FullName → *wireSchema
}

// wireSchema is what the checker needs of a message type: its fields by number.
type wireSchema struct {
	dense  []wireField // by field number, for the common small numbers
	sparse map[protowire.Number]*wireField
}

// wireField is a field of a wireSchema. A zero wireField (unknown numbers included) is
// skipped.
type wireField struct {
	name  string
	list  bool        // repeated or map: paths index it
	utf8  bool        // a string that must be UTF-8
	inner *wireSchema // a message or map entry to look into
}

// maxDense bounds the field numbers kept in a wireSchema's slice.
const maxDense = 256

// invalid returns the path of the first string field of b, an encoded md, that is not
// UTF-8 ("messages[3].parts[0].text.text"), and whether there is one. Malformed input is
// left for the decoder to report.
func (c *utf8Checker) invalid(md protoreflect.MessageDescriptor, b []byte) (string, bool) {
	s := c.schema(md)
	if s.valid(b) {
		return "", false
	}
	return s.find(b), true
}

func (c *utf8Checker) schema(md protoreflect.MessageDescriptor) *wireSchema {
	if s, ok := c.schemas.Load(md.FullName()); ok {
		return s.(*wireSchema)
	}
	built := make(map[protoreflect.FullName]*wireSchema)
	s := buildSchema(md, built)
	for name, bs := range built {
		c.schemas.LoadOrStore(name, bs) // racing builders store equivalent tables
	}
	return s
}

// buildSchema builds the table of md and of every message type reachable from it into
// built, which also breaks the cycles of recursive types.
func buildSchema(md protoreflect.MessageDescriptor, built map[protoreflect.FullName]*wireSchema) *wireSchema {
	if s, ok := built[md.FullName()]; ok {
		return s
	}
	s := &wireSchema{}
	built[md.FullName()] = s
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := wireField{name: string(fd.Name()), list: fd.IsList() || fd.IsMap()}
		switch fd.Kind() {
		case protoreflect.StringKind:
			f.utf8 = enforcesUTF8(fd)
		case protoreflect.MessageKind:
			f.inner = buildSchema(fd.Message(), built)
		default:
			continue // nothing to check inside
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

// enforcesUTF8 reports whether the protobuf runtime rejects a non-UTF-8 value of the string
// field fd: in proto3 files, and in editions files unless the field's features say otherwise.
func enforcesUTF8(fd protoreflect.FieldDescriptor) bool {
	if e, ok := fd.(interface{ EnforceUTF8() bool }); ok {
		return e.EnforceUTF8()
	}
	return fd.ParentFile().Syntax() == protoreflect.Proto3
}

func (s *wireSchema) field(n protowire.Number) *wireField {
	if n >= 0 && int(n) < len(s.dense) {
		return &s.dense[n]
	}
	return s.sparse[n]
}

// valid reports whether every string field in b is UTF-8.
func (s *wireSchema) valid(b []byte) bool {
	for {
		num, v, rest, ok := nextBytesField(b)
		if !ok {
			return true
		}
		b = rest
		if f := s.field(num); f != nil {
			switch {
			case f.utf8 && !utf8.Valid(v):
				return false
			case f.inner != nil && !f.inner.valid(v):
				return false
			}
		}
	}
}

// find returns the path of the first string field in b that is not UTF-8, like
// "messages[3].parts[0].text.text"; b must not be valid.
func (s *wireSchema) find(b []byte) string {
	seen := make(map[protowire.Number]int)
	for {
		num, v, rest, ok := nextBytesField(b)
		if !ok {
			return "(unknown field)"
		}
		b = rest
		f := s.field(num)
		if f == nil {
			continue
		}
		name := f.name
		if f.list {
			name += "[" + strconv.Itoa(seen[num]) + "]"
			seen[num]++
		}
		switch {
		case f.utf8 && !utf8.Valid(v):
			return name
		case f.inner != nil && !f.inner.valid(v):
			return name + "." + f.inner.find(v)
		}
	}
}

// nextBytesField skips the fields of b up to the next length-delimited one (strings,
// messages, bytes, packed scalars) and returns its number, its value and what follows it.
// ok is false at the end of b and on malformed input, which the decoder reports. One-byte
// tags and lengths, and varints, are decoded inline: they are nearly all of a conversation.
func nextBytesField(b []byte) (num protowire.Number, v, rest []byte, ok bool) {
	for len(b) > 0 {
		tag := uint64(b[0])
		if tag < 0x80 {
			b = b[1:]
		} else {
			t, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, nil, nil, false
			}
			tag, b = t, b[n:]
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		switch typ {
		case protowire.BytesType:
		case protowire.VarintType:
			i := 0
			for i < len(b) && b[i] >= 0x80 {
				i++
			}
			if i == len(b) {
				return 0, nil, nil, false
			}
			b = b[i+1:]
			continue
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, nil, nil, false
			}
			b = b[n:]
			continue
		}
		var size uint64
		if len(b) > 0 && b[0] < 0x80 {
			size, b = uint64(b[0]), b[1:]
		} else {
			l, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, nil, nil, false
			}
			size, b = l, b[n:]
		}
		if size > uint64(len(b)) {
			return 0, nil, nil, false
		}
		return num, b[:size], b[size:], true
	}
	return 0, nil, nil, false
}
