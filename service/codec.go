package service

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the fallback codec
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/uninit"
)

// vtMessage is a message with the fast paths vtprotobuf generates: every message of
// compactor.v1 (see buf.gen.yaml).
type vtMessage interface {
	proto.Message
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
	UnmarshalVTUnsafe([]byte) error
}

// codec is the server's gRPC codec; the wire format is ordinary protobuf. It encodes and
// decodes compactor.v1 messages with the code vtprotobuf generates for them, which works on
// the struct fields directly where the protobuf runtime goes through reflection (notably for
// every oneof, which the IR uses in each part). Other messages (health, reflection) go to
// gRPC's standard codec.
//
// A decoded request is backed by one buffer of its own: its strings and bytes point into a
// copy of the encoded request made for it (never into gRPC's pooled buffers), so decoding
// allocates the message structs and that copy instead of one object per string. Handlers
// must not modify the request's bytes fields, and a string kept beyond the call keeps the
// whole copy alive: clone request strings that outlive it.
// The generated decoder does not check UTF-8, so the codec does, as the protobuf runtime
// would (see utf8Checker). A request with a string that is not UTF-8 is bad input, to be
// answered like any other with INVALID_ARGUMENT naming the field; but gRPC reports every
// error of a codec as INTERNAL. So such a request decodes, the codec holds the field for it,
// and the interceptors of rejectInvalid fail the call before any handler sees the request.
type codec struct {
	fallback encoding.CodecV2
	utf8     utf8Checker
	// rejected maps each request decoded with a string that is not UTF-8 to the field's
	// path, until an interceptor takes it; pending counts them, so that the calls of valid
	// requests (nearly all) pass without a look into the map.
	rejected sync.Map
	pending  atomic.Int64
}

func newCodec() *codec {
	return &codec{fallback: encoding.GetCodecV2("proto")}
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

// Unmarshal decodes data into v, which must be empty. If a string field of v is not UTF-8,
// v decodes all the same and rejection(v) reports the field, once.
func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(vtMessage)
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	b := own(data)
	field, bad := c.utf8.invalid(m.ProtoReflect().Descriptor(), b)
	if err := m.UnmarshalVTUnsafe(b); err != nil {
		return err
	}
	if bad {
		c.rejected.Store(v, field)
		c.pending.Add(1)
	}
	return nil
}

// rejection returns, the first time it is asked about a message Unmarshal decoded with a
// string that is not UTF-8, an *engine.ValidationError naming that string's field; otherwise
// nil.
func (c *codec) rejection(v any) error {
	if c.pending.Load() == 0 {
		return nil
	}
	field, ok := c.rejected.LoadAndDelete(v)
	if !ok {
		return nil
	}
	c.pending.Add(-1)
	return engine.Invalid(field.(string), "string field contains invalid UTF-8")
}

// rejectInvalid fails a unary call whose request has a string that is not UTF-8 with
// INVALID_ARGUMENT and a BadRequest naming the field, before the handler runs. With
// rejectInvalidStream, it must be among the server's interceptors, so that every message the
// codec decodes is looked at (and none stays in rejected).
func (c *codec) rejectInvalid(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := c.rejection(req); err != nil {
		return nil, toStatus(err)
	}
	return h(ctx, req)
}

// settle runs the rest of the chain, then drops the rejection of a request no later
// interceptor passed on to rejectInvalid (a refused call), so none stays in rejected.
func (c *codec) settle(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if c.pending.Load() != 0 {
		if _, ok := c.rejected.LoadAndDelete(req); ok { // not there when rejectInvalid took it
			c.pending.Add(-1)
		}
	}
	return resp, err
}

// rejectInvalidStream is rejectInvalid for the messages a streaming call receives.
func (c *codec) rejectInvalidStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &rejectingStream{ServerStream: ss, c: c})
}

// rejectingStream fails RecvMsg for a message with a string that is not UTF-8.
type rejectingStream struct {
	grpc.ServerStream
	c *codec
}

func (s *rejectingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.c.rejection(m); err != nil {
		return toStatus(err)
	}
	return nil
}

// own copies data into one new buffer, read-only from then on: the decoded message's strings
// and bytes point into it. The copy is allocated without being zeroed first (data overwrites
// every byte), which matters at tens of KiB per request.
func own(data mem.BufferSlice) []byte {
	b := uninit.Bytes(data.Len())
	for _, buf := range data {
		b = append(b, buf.ReadOnlyData()...)
	}
	return b
}
