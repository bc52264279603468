package service

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the fallback codec
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// vtMessage is a message with the fast paths vtprotobuf generates: every message of
// compactor.v1 (see buf.gen.yaml).
type vtMessage interface {
	proto.Message
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
	UnmarshalVTUnsafe([]byte) error
}

// codec is the server's gRPC codec; the wire format is ordinary protobuf. It encodes
// compactor.v1 messages with the code vtprotobuf generates for them, which works on the
// struct fields directly where the protobuf runtime goes through reflection (notably for
// every oneof, which the IR uses in each part). Other messages (health, reflection) go to
// gRPC's standard codec.
//
// CompactorService requests are not decoded here: they arrive as a rawRequest, whose bytes
// the codec keeps (charged to the memory budget), and the method handlers decode them once
// the call is admitted (see rawRequest), so that every decoding error is answered as bad
// input rather than as the INTERNAL gRPC makes of any codec error. Other compactor.v1
// messages (a client's, a test's) decode here through the same checks.
//
// A decoded request is backed by one buffer of its own: its strings and bytes point into a
// copy of the encoded request made for it (never into gRPC's pooled buffers), so decoding
// allocates the message structs and that copy instead of one object per string. Handlers
// must not modify the request's bytes fields, and a string kept beyond the call keeps the
// whole copy alive: clone request strings that outlive it. (A request with a known field in
// a wire type not its own, which vtprotobuf's decoder refuses, decodes through the protobuf
// runtime instead, into strings of their own: see decoding.)
type codec struct {
	fallback encoding.CodecV2
	admit    Admitter
}

// newCodec returns the codec of a server whose requests' bytes admit admits.
func newCodec(admit Admitter) *codec {
	return &codec{fallback: encoding.GetCodecV2("proto"), admit: admit}
}

// Name is the content subtype the codec serves: ordinary protobuf.
func (c *codec) Name() string { return "proto" }

// Marshal encodes v, into a buffer from gRPC's pool when it is large enough to be pooled. A
// LowerResponse's body is not copied (see marshalLower).
func (c *codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*compactorv1.LowerResponse); ok && len(r.GetBody()) >= bodyByReference && len(r.ProtoReflect().GetUnknown()) == 0 {
		return marshalLower(r)
	}
	m, ok := v.(vtMessage)
	if !ok {
		return c.fallback.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		b := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVT(b); err != nil {
			return nil, fmt.Errorf("marshal %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := mem.DefaultBufferPool()
	b := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT((*b)[:size]); err != nil {
		pool.Put(b)
		return nil, fmt.Errorf("marshal %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(b, pool)}, nil
}

// bodyByReference is the size from which marshalLower hands a body to gRPC by reference.
const bodyByReference = 1 << 10

// marshalLower encodes a LowerResponse as three buffers: the body's tag and length, the body
// itself by reference (gRPC only reads it, and the string is immutable), and the other
// fields; together they are the bytes MarshalVT writes, without copying the body, which is
// most of the response (tens of KiB for a real conversation). r must have no unknown fields.
func marshalLower(r *compactorv1.LowerResponse) (mem.BufferSlice, error) {
	head := protowire.AppendVarint(protowire.AppendTag(make([]byte, 0, 1+binary.MaxVarintLen64), 1, protowire.BytesType), uint64(len(r.Body)))
	tail, err := (&compactorv1.LowerResponse{Warnings: r.Warnings, Cursor: r.Cursor}).MarshalVT()
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", r, err)
	}
	return mem.BufferSlice{
		mem.SliceBuffer(head),
		mem.SliceBuffer(unsafe.Slice(unsafe.StringData(r.Body), len(r.Body))),
		mem.SliceBuffer(tail),
	}, nil
}

// Unmarshal keeps a CompactorService request's bytes for its handler (rawRequest), decodes
// another compactor.v1 message through the decoding limits (checkRequest), and hands any
// other message to gRPC's codec.
func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *rawRequest:
		m.receive(data, c.admit)
		return nil
	case vtMessage:
		b := own(data)
		d, err := checkRequest(b, m)
		if err != nil {
			return err
		}
		return d.unmarshal(b, m)
	}
	return c.fallback.Unmarshal(data, v)
}
