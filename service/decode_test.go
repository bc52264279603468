package service

import (
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/hostile"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// violation returns the one violation of err, an *engine.ValidationError, and its Limit.
func violation(t *testing.T, err error) (engine.FieldViolation, bool) {
	t.Helper()
	var ve *engine.ValidationError
	if !errors.As(err, &ve) || len(ve.Violations) != 1 {
		t.Fatalf("error %v, want a ValidationError with one violation", err)
	}
	return ve.Violations[0], ve.Limit
}

// Requests nested beyond MaxDecodeDepth, parts or provider options, are refused as a limit
// naming where, before anything decodes them; at the limit they decode.
func TestDecodeDepthLimit(t *testing.T) {
	for _, tt := range []struct {
		name       string
		build      func(int) []byte
		perLevel   int // depth levels one nesting adds
		base       int // levels around the nesting
		wantPrefix string
	}{
		// PlanRequest, Message, the outer Part and the innermost TextPart, then 4 levels
		// per nested part.
		{"parts", hostile.NestedParts, 4, 4, "messages[0].parts[0].tool_result.output.content.parts[0].tool_result"},
		// PlanRequest, Message, then one level per Struct (map entries and Values do not
		// count).
		{"struct", hostile.NestedStruct, 1, 2, "messages[0].provider_options[0].value.fields[0].value.struct_value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fits := (MaxDecodeDepth - tt.base) / tt.perLevel
			if err := newCodec(admitAll{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(tt.build(fits))}, &compactorv1.PlanRequest{}); err != nil {
				t.Fatalf("nested %d deep, within the limit: %v", fits, err)
			}
			for _, depth := range []int{fits + 1, 100_000} {
				b := tt.build(depth)
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				_, err := checkRequest(b, &compactorv1.PlanRequest{})
				runtime.ReadMemStats(&after)
				// Refusing costs what the first levels do, not the nesting's full depth.
				if n := after.TotalAlloc - before.TotalAlloc; n > 256<<10 {
					t.Errorf("nested %d deep: refusing it allocated %d bytes", depth, n)
				}
				v, limit := violation(t, err)
				if !limit || !strings.HasPrefix(v.Field, tt.wantPrefix) || !strings.Contains(v.Description, "nested deeper than the limit of 64 levels") {
					t.Errorf("nested %d deep: %+v (limit %v), want a limit naming %s…", depth, v, limit, tt.wantPrefix)
				}
				if len(v.Field) > 1024 {
					t.Errorf("nested %d deep: a %d-byte field path", depth, len(v.Field))
				}
			}
		})
	}
}

// The wire walk and the path report run without recursion: with goroutine stacks bounded
// to 256 KiB, a request nested 100,000 deep is walked end to end (limits lifted) and its
// deepest string is named.
func TestDecodeWalkIsIterative(t *testing.T) {
	b := hostile.NestedParts(100_000)
	b[len(b)-1] = 0xff // the innermost text is no longer UTF-8
	s := schemaOf((&compactorv1.PlanRequest{}).ProtoReflect().Descriptor())
	old := debug.SetMaxStack(256 << 10)
	defer debug.SetMaxStack(old)
	done := make(chan problem)
	var path string
	go func() {
		_, p := s.check(b, 1<<30, 1<<62)
		path = s.pathAt(b, p.off)
		done <- p
	}()
	if p := <-done; p.kind != problemUTF8 {
		t.Fatalf("problem %+v, want the innermost string's invalid UTF-8", p)
	}
	if !strings.HasPrefix(path, "messages[0].parts[0].tool_result") || !strings.HasSuffix(path, "parts[0].text.text") || !strings.Contains(path, "more levels") {
		t.Errorf("path %q", path)
	}
}

// Elements beyond DecodeCostMultiple times the request's size are refused as a limit before
// decoding: a million empty messages in 2 MiB would decode to 144 MiB.
func TestDecodeElementLimit(t *testing.T) {
	_, err := checkRequest(hostile.EmptyMessages(1<<20), &compactorv1.PlanRequest{})
	v, limit := violation(t, err)
	if !limit || !strings.HasPrefix(v.Field, "messages[") || !strings.Contains(v.Description, "too many elements") {
		t.Errorf("a million empty messages: %+v (limit %v), want a limit on elements", v, limit)
	}
	// Small requests of small messages stay within MinDecodeCost whatever their ratio.
	if _, err := checkRequest(hostile.EmptyMessages(1000), &compactorv1.PlanRequest{}); err != nil {
		t.Errorf("a thousand empty messages: %v", err)
	}
}

// Malformed protobuf is bad input naming where it is wrong, never a decoder error.
func TestDecodeMalformed(t *testing.T) {
	for name, b := range hostile.Malformed() {
		t.Run(name, func(t *testing.T) {
			if proto.Unmarshal(b, &compactorv1.PlanRequest{}) == nil && name != "wrong wire type" && name != "group on a message field" {
				t.Fatal("the protobuf runtime accepts it; the case is wrong")
			}
			err := newCodec(admitAll{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &compactorv1.PlanRequest{})
			v, limit := violation(t, err)
			if limit || v.Field == "" || !strings.HasPrefix(v.Description, "malformed protobuf: ") {
				t.Errorf("%+v (limit %v), want a malformed-protobuf violation naming a field", v, limit)
			}
		})
	}
}

// What check counts is a bound on the memory a decoded request keeps, for real
// conversations and for the shapes that take the most per encoded byte.
func TestDecodeCostBoundsAllocation(t *testing.T) {
	opts := map[string]*structpb.Struct{"p": {Fields: map[string]*structpb.Value{"a": structpb.NewListValue(&structpb.ListValue{
		Values: []*structpb.Value{structpb.NewNullValue(), structpb.NewBoolValue(true), structpb.NewStructValue(&structpb.Struct{})}})}}}
	shapes := map[string][]byte{
		"empty messages": hostile.EmptyMessages(10_000),
		"nested parts":   hostile.NestedParts(15),
		"nested struct":  hostile.NestedStruct(60),
	}
	many := func(p *compactorv1.Part) []byte {
		m := &compactorv1.Message{Role: compactorv1.Role_ROLE_USER}
		for range 5000 {
			m.Parts = append(m.Parts, p)
		}
		b, err := proto.Marshal(&compactorv1.PlanRequest{Messages: []*compactorv1.Message{m}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	shapes["empty parts"] = many(&compactorv1.Part{})
	shapes["empty texts"] = many(&compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{}}})
	shapes["options"] = many(&compactorv1.Part{ProviderOptions: opts})
	for i, req := range corpusRequests(t) {
		if i%5 == 0 { // a PlanRequest per conversation
			b, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			shapes["corpus "+string(rune('a'+i/5%26))] = b
		}
	}
	for name, b := range shapes {
		cost, p := schemaOf((&compactorv1.PlanRequest{}).ProtoReflect().Descriptor()).check(b, MaxDecodeDepth, 1<<62)
		if p.kind != problemNone {
			t.Fatalf("%s: %+v", name, p)
		}
		// The heap is the process's: other tests' goroutines (a Redis client redialling)
		// allocate too. Their noise only adds, so the least of a few decodes is the
		// request's own.
		kept := int64(math.MaxInt64)
		for range 3 {
			kept = min(kept, decodedSize(t, b))
		}
		if kept > cost {
			t.Errorf("%s: the decoded request keeps %d bytes, more than the %d counted", name, kept, cost)
		}
		t.Logf("%s: %d bytes encoded, %d counted (%.1f×), %d kept", name, len(b), cost, float64(cost)/float64(len(b)), kept)
	}
}

// FuzzDecodeRequest feeds raw bytes to the codec's decode path as each request type: it
// never panics or overflows its stack; what it decodes, the protobuf runtime decodes to the
// same message; what the runtime refuses (not protobuf, a string that is not UTF-8), it
// refuses too, as bad input or a limit.
func FuzzDecodeRequest(f *testing.F) {
	small := []proto.Message{
		&compactorv1.PlanRequest{Messages: []*compactorv1.Message{{Role: compactorv1.Role_ROLE_USER, Id: "m1",
			Parts:           []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "héllo"}}}},
			ProviderOptions: map[string]*structpb.Struct{"anthropic": {Fields: map[string]*structpb.Value{"cache": structpb.NewStringValue("x")}}}}},
			Policy: &compactorv1.Policy{ContextWindow: 8000, Prune: &compactorv1.PrunePolicy{ExcludeTools: []string{"bash"}}}},
		&compactorv1.CompactRequest{Instructions: "keep paths", Summarizer: "extractive", Force: true},
		&compactorv1.LowerRequest{Provider: compactorv1.Provider_PROVIDER_GEMINI, BaseBody: `{"model":"m"}`},
		&compactorv1.LiftRequest{Body: `{"messages":[]}`},
	}
	for i, m := range small {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	f.Add(uint8(0), hostile.NestedParts(20))
	f.Add(uint8(2), hostile.NestedParts(100_000)) // 1.5 MiB: the stack overflow of issue 27
	f.Add(uint8(0), hostile.NestedStruct(70))
	f.Add(uint8(0), hostile.EmptyMessages(100))
	for _, b := range hostile.Malformed() {
		f.Add(uint8(0), b)
	}
	c := newCodec(admitAll{})
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		m := small[int(kind)%len(small)].ProtoReflect().New().Interface()
		err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m)
		want := m.ProtoReflect().New().Interface()
		runtimeErr := proto.Unmarshal(b, want)
		if err != nil {
			var ve *engine.ValidationError
			if !errors.As(err, &ve) || len(ve.Violations) != 1 || ve.Violations[0].Field == "" {
				t.Fatalf("refusal %v, want one violation naming a field", err)
			}
			return
		}
		if runtimeErr != nil {
			t.Fatalf("decoded what the protobuf runtime refuses (%v)", runtimeErr)
		}
		// vtprotobuf's decoder keeps an unknown field's tag as it was written where the
		// runtime re-encodes it, and drops google.protobuf.Struct's unknown fields: compare
		// through the runtime, without those.
		enc, err := proto.Marshal(m)
		if err != nil {
			t.Fatalf("the decoded message does not encode: %v", err)
		}
		got := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(enc, got); err != nil {
			t.Fatalf("the decoded message's encoding does not decode: %v", err)
		}
		discardWellKnownUnknown(got.ProtoReflect())
		discardWellKnownUnknown(want.ProtoReflect())
		if !proto.Equal(got, want) {
			t.Fatalf("decoded %v, the runtime %v", m, want)
		}
	})
}

// discardWellKnownUnknown drops the unknown fields of every google.protobuf message in m.
func discardWellKnownUnknown(m protoreflect.Message) {
	if !m.IsValid() {
		return
	}
	if strings.HasPrefix(string(m.Descriptor().FullName()), "google.protobuf.") {
		m.SetUnknown(nil)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
				discardWellKnownUnknown(e.Message())
				return true
			})
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				discardWellKnownUnknown(v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			discardWellKnownUnknown(v.Message())
		}
		return true
	})
}

// decodedSize returns the live heap a PlanRequest decoded from b keeps.
func decodedSize(t *testing.T, b []byte) int64 {
	t.Helper()
	var before, after runtime.MemStats
	m := &compactorv1.PlanRequest{}
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := m.UnmarshalVTUnsafe(b); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}
