package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/internal/uninit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Admitter admits the work of CompactorService calls (package limit's Shedder implements
// it): a slot among the calls in flight, taken once a call's request has arrived (a stream
// waiting for its request holds none), and the memory budget the requests being decoded and
// held draw on. A refusal is a status error, returned to the caller as it is.
type Admitter interface {
	// AdmitCall takes a slot for a call whose request has arrived; release gives it back.
	AdmitCall(ctx context.Context) (release func(), err error)
	// AdmitBytes reserves n bytes of the memory budget; release gives them back.
	AdmitBytes(n int64) (release func(), err error)
}

// admitAll is the Admitter of a server without bounds.
type admitAll struct{}

func (admitAll) AdmitCall(context.Context) (func(), error) { return func() {}, nil }
func (admitAll) AdmitBytes(int64) (func(), error)          { return func() {}, nil }

// halfCloseTimeout bounds how long a request's bytes are held between its message and the
// end of its stream (which a unary call's client sends at once, right after the message):
// past it the bytes and their share of the memory budget are dropped, so that a caller
// cannot hold the budget with requests it never finishes.
const halfCloseTimeout = time.Second

// rawRequest is a CompactorService request as it arrived, not yet decoded: the codec copies
// its encoded bytes into a buffer of its own, charged to the memory budget, and the method
// handlers decode it (requestDecoder.decode) once the interceptors admitted the call. Every
// decoding error is then answered as bad input (INVALID_ARGUMENT naming the field, or
// RESOURCE_EXHAUSTED naming a limit), where gRPC reports any codec error as INTERNAL; and a
// caller the interceptors refuse (no credentials) never has its request decoded.
type rawRequest struct {
	mu      sync.Mutex
	b       []byte
	release func() // gives b's share of the memory budget back
	err     error  // why the request was refused on arrival, or dropped since
	timer   *time.Timer
}

// errRequestNotClosed is the answer to a request whose stream stayed open past
// halfCloseTimeout after its message.
var errRequestNotClosed = status.Errorf(codes.DeadlineExceeded,
	"the request's stream did not end within %v of its message: its bytes were dropped", halfCloseTimeout)

// receive keeps data, the encoded request, in a buffer of its own if the memory budget
// admits it, and starts the clock on the end of the stream. A second message (which gRPC
// refuses for a unary call) drops the first.
func (r *rawRequest) receive(data mem.BufferSlice, admit Admitter) {
	r.drop(nil)
	release, err := admit.AdmitBytes(int64(data.Len()))
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.err = err
		return
	}
	r.b, r.release, r.err = own(data), release, nil
	r.timer = time.AfterFunc(halfCloseTimeout, func() { r.drop(errRequestNotClosed) })
}

// drop forgets the request's bytes and gives their memory back; err, when not nil, is what
// take reports from then on.
func (r *rawRequest) drop(err error) {
	r.mu.Lock()
	release := r.release
	r.b, r.release = nil, nil
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if err != nil {
		r.err = err
	}
	r.mu.Unlock()
	if release != nil {
		release()
	}
}

// take returns the request's bytes and the release of their memory, now owned by the
// caller, or why there are none.
func (r *rawRequest) take() (b []byte, release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	b, release, err = r.b, r.release, r.err
	r.b, r.release = nil, nil
	if err == nil && b == nil {
		err = status.Error(codes.Internal, "no request received")
	}
	return b, release, err
}

// requestDecoder decodes the requests of admitted CompactorService calls.
type requestDecoder struct {
	admit Admitter
}

// decode decodes the request of the call ctx belongs to into m: it takes the call's slot,
// checks the encoded request against the decoding limits (checkRequest), reserves what
// decoding it costs, and decodes it. What it reserves is held (package hold) until the call
// and the work detached from it end.
func (d requestDecoder) decode(ctx context.Context, raw *rawRequest, m vtMessage) error {
	b, release, err := raw.take()
	if err != nil {
		return err
	}
	holdOrRelease(ctx, release)
	slot, err := d.admit.AdmitCall(ctx)
	if err != nil {
		return err
	}
	if !hold.AddSlot(ctx, slot) {
		slot()
	}
	dec, err := checkRequest(b, m)
	if err != nil {
		return toStatus(err)
	}
	release, err = d.admit.AdmitBytes(dec.cost)
	if err != nil {
		return err
	}
	holdOrRelease(ctx, release)
	return toStatus(dec.unmarshal(b, m))
}

// holdOrRelease makes the call ctx belongs to hold release, or runs it when there is no
// call to hold it.
func holdOrRelease(ctx context.Context, release func()) {
	if !hold.Add(ctx, release) {
		release()
	}
}

// decodeLimit is the decoded size a request of n encoded bytes may reach.
func decodeLimit(n int) int64 {
	return max(MinDecodeCost, DecodeCostMultiple*int64(n))
}

// checkRequest checks b, an encoded m, against the decoding limits and for strings that are
// not UTF-8 (which the generated decoder does not check), and returns what decoding it
// takes. A problem is an *engine.ValidationError naming the field: malformed protobuf or a
// string that is not UTF-8 (INVALID_ARGUMENT), nesting deeper than MaxDecodeDepth or
// elements beyond DecodeCostMultiple (a limit: RESOURCE_EXHAUSTED).
func checkRequest(b []byte, m vtMessage) (decoding, error) {
	s := schemaOf(m.ProtoReflect().Descriptor())
	limit := decodeLimit(len(b))
	d, p := s.check(b, MaxDecodeDepth, limit)
	switch p.kind {
	case problemNone:
		return d, nil
	case problemUTF8:
		return d, engine.Invalid(s.pathAt(b, p.off), "string field contains invalid UTF-8")
	case problemDepth:
		return d, engine.TooLarge(s.pathAt(b, p.off), fmt.Sprintf("nested deeper than the limit of %d levels", MaxDecodeDepth))
	case problemCost:
		return d, engine.TooLarge(s.pathAt(b, p.off), fmt.Sprintf(
			"too many elements: decoding the %d-byte request would take more than %d bytes (the limit is %d times its size)",
			len(b), limit, DecodeCostMultiple))
	}
	return d, engine.Invalid(s.pathAt(b, p.off), "malformed protobuf: "+p.what)
}

// unmarshal decodes b, which checkRequest accepted as d, into m. Through vtprotobuf's
// decoder m then points into b: b must not change from then on. A foreign request decodes
// through the protobuf runtime, which copies what it keeps.
func (d decoding) unmarshal(b []byte, m vtMessage) error {
	var err error
	if d.foreign {
		err = proto.Unmarshal(b, m)
	} else {
		err = m.UnmarshalVTUnsafe(b)
	}
	if err != nil {
		return engine.Invalid("request", "malformed protobuf: "+err.Error())
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
