package service

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
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
			if proto.Unmarshal(b, &compactorv1.PlanRequest{}) == nil {
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

// A known field in a wire type not its own is valid protobuf: the protobuf runtime keeps it
// as an unknown field (skips it in a map entry), and so does the codec, whose message is
// then the runtime's.
func TestDecodeForeignWireTypes(t *testing.T) {
	for name, b := range hostile.ForeignWireTypes() {
		t.Run(name, func(t *testing.T) {
			want := &compactorv1.PlanRequest{}
			if err := proto.Unmarshal(b, want); err != nil {
				t.Fatalf("the protobuf runtime refuses it (%v); the case is wrong", err)
			}
			if err := (&compactorv1.PlanRequest{}).UnmarshalVTUnsafe(b); err == nil {
				t.Fatal("vtprotobuf's decoder accepts it: the case exercises nothing")
			}
			d, err := checkRequest(b, &compactorv1.PlanRequest{})
			if err != nil || !d.foreign {
				t.Fatalf("checked: %+v, %v; want it accepted as foreign", d, err)
			}
			got := &compactorv1.PlanRequest{}
			if err := newCodec(admitAll{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("decoded %v, the runtime %v", got, want)
			}
		})
	}
}

// What check counts is a bound on the memory a decoded request keeps, for real
// conversations and for the shapes that take the most per encoded byte, through either
// decoder. Each request is decoded once, in a process of its own (isolated) where nothing
// else allocates, and what it keeps is the live heap after a collection, less the heap
// before it.
func TestDecodeCostBoundsAllocation(t *testing.T) {
	if !isolated(t) {
		return
	}
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
	shapes["short texts"] = many(&compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "ok"}}})
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
	// The same through the protobuf runtime, which copies every string: each ends with a
	// known field in a foreign wire type (messages as a varint).
	for name, b := range maps.Clone(shapes) {
		shapes[name+", foreign"] = append(slices.Clone(b), 1<<3, 1)
	}
	for name, b := range shapes {
		d, p := schemaOf((&compactorv1.PlanRequest{}).ProtoReflect().Descriptor()).check(b, MaxDecodeDepth, 1<<62)
		if p.kind != problemNone || d.foreign != strings.HasSuffix(name, "foreign") {
			t.Fatalf("%s: %+v, %+v", name, d, p)
		}
		kept := decodedSize(t, b, d)
		if kept > d.cost {
			t.Errorf("%s: the decoded request keeps %d bytes, more than the %d counted", name, kept, d.cost)
		}
		t.Logf("%s: %d bytes encoded, %d counted (%.1f×), %d kept", name, len(b), d.cost, float64(d.cost)/float64(len(b)), kept)
	}
}

// isolatedEnv names the test a child process of isolated runs.
const isolatedEnv = "COMPACTORD_ISOLATED_TEST"

// isolated runs the calling test again, alone, in a child process (the test binary), so
// that what it measures of the process's heap is its own: the goroutines other tests leave
// behind (a Redis client redialling, a server draining) do not run there. It reports
// whether this is that child, where the test goes on; in the parent it reports the child's
// failures and output.
func isolated(t *testing.T) bool {
	t.Helper()
	if os.Getenv(isolatedEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), isolatedEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s, run alone: %v\n%s", t.Name(), err, out)
	} else {
		t.Logf("%s", out)
	}
	return false
}

// FuzzDecodeRequest feeds raw bytes to the codec's decode path as each request type and
// holds its answers to the protobuf runtime's, both ways: it never panics or overflows its
// stack; what the runtime refuses (not protobuf, a string that is not UTF-8), it refuses
// too, as bad input or a limit; what the runtime accepts, it accepts unless the request
// really is beyond a decoding limit (nested deeper than MaxDecodeDepth, or elements enough
// to reach the cost bound), and decodes to the runtime's message.
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
	for _, b := range hostile.ForeignWireTypes() {
		f.Add(uint8(0), b)
	}
	c := newCodec(admitAll{})
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		m := small[int(kind)%len(small)].ProtoReflect().New().Interface()
		err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m)
		want := m.ProtoReflect().New().Interface()
		runtimeErr := proto.Unmarshal(b, want)
		switch {
		case err != nil:
			var ve *engine.ValidationError
			if !errors.As(err, &ve) || len(ve.Violations) != 1 || ve.Violations[0].Field == "" {
				t.Fatalf("refusal %v, want one violation naming a field", err)
			}
			if runtimeErr == nil {
				beyondLimits(t, b, want.ProtoReflect(), ve)
			}
		case runtimeErr != nil:
			t.Fatalf("decoded what the protobuf runtime refuses (%v)", runtimeErr)
		default:
			sameAsRuntime(t, m, want)
		}
	})
}

// beyondLimits fails t unless ve, the codec's refusal of b, which the protobuf runtime
// decoded to m, is a decoding limit that m really exceeds, measured on m: nesting deeper
// than MaxDecodeDepth, or enough elements to reach the cost bound.
func beyondLimits(t *testing.T, b []byte, m protoreflect.Message, ve *engine.ValidationError) {
	t.Helper()
	v := ve.Violations[0]
	switch {
	case !ve.Limit:
		t.Fatalf("refused what the protobuf runtime accepts: %s: %s", v.Field, v.Description)
	case strings.Contains(v.Description, "nested deeper"):
		if d := depthOf(m); d <= MaxDecodeDepth {
			t.Fatalf("refused as nested deeper than %d levels what nests %d: %s", MaxDecodeDepth, d, v.Field)
		}
	case strings.Contains(v.Description, "too many elements"):
		if n := elementsOf(m); n*maxElementCost < decodeLimit(len(b)) {
			t.Fatalf("refused for too many elements a request of %d (%d bytes encoded), too few to reach the bound of %d bytes", n, len(b), decodeLimit(len(b)))
		}
	default:
		t.Fatalf("refused with an unknown limit: %s: %s", v.Field, v.Description)
	}
}

// maxElementCost is more than decoding any one element of a request takes: the largest
// message struct with its slice slot or oneof wrapper, a map with its first entry, 16
// bytes per byte of packed numbers, twice the bytes of an unknown field, a quarter more
// than a copied string's bytes (elementsOf counts each byte of these as an element).
const maxElementCost = 1024

// depthOf is the nesting depth of m as the decoding limits count it: one level per message,
// none for google.protobuf.Value (nor map entries, which are not messages here).
func depthOf(m protoreflect.Message) int {
	deepest := 0
	eachMessage(m, func(c protoreflect.Message) { deepest = max(deepest, depthOf(c)) })
	if m.Descriptor().FullName() == "google.protobuf.Value" {
		return deepest
	}
	return 1 + deepest
}

// elementsOf counts the elements of m: its messages, list and map entries, and the bytes of
// its unknown fields and strings.
func elementsOf(m protoreflect.Message) int64 {
	n := 1 + int64(len(m.GetUnknown()))
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			n += int64(v.List().Len())
		case fd.IsMap():
			n += int64(v.Map().Len())
		case fd.Kind() == protoreflect.StringKind:
			n += int64(len(v.String()))
		case fd.Kind() == protoreflect.BytesKind:
			n += int64(len(v.Bytes()))
		}
		return true
	})
	eachMessage(m, func(c protoreflect.Message) { n += elementsOf(c) })
	return n
}

// eachMessage calls f with every message m holds directly: in fields, lists and map values.
func eachMessage(m protoreflect.Message, f func(protoreflect.Message)) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
				f(e.Message())
				return true
			})
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				f(v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			f(v.Message())
		}
		return true
	})
}

// sameAsRuntime fails t unless m, which the codec decoded, is want, which the protobuf
// runtime decoded from the same bytes. vtprotobuf's decoder keeps an unknown field's tag as
// it was written where the runtime re-encodes it, and drops google.protobuf.Struct's unknown
// fields: they are compared through the runtime, without those.
func sameAsRuntime(t *testing.T, m, want proto.Message) {
	t.Helper()
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
}

// discardWellKnownUnknown drops the unknown fields of every google.protobuf message in m.
func discardWellKnownUnknown(m protoreflect.Message) {
	if !m.IsValid() {
		return
	}
	if strings.HasPrefix(string(m.Descriptor().FullName()), "google.protobuf.") {
		m.SetUnknown(nil)
	}
	eachMessage(m, discardWellKnownUnknown)
}

// decodedSize returns the live heap a PlanRequest decoded from b, as check found it decodes
// (d), keeps: the heap after decoding it and a collection, less the heap before.
func decodedSize(t *testing.T, b []byte, d decoding) int64 {
	t.Helper()
	var before, after runtime.MemStats
	// Decoded once before the measure, so what the runtime initializes on first use (a
	// message type's lazily built tables) is not counted as the request's.
	if err := d.unmarshal(b, &compactorv1.PlanRequest{}); err != nil {
		t.Fatal(err)
	}
	// The request is decoded decodedCopies times and the heap they keep divided among
	// them: what the runtime itself allocates meanwhile (a few kilobytes under the race
	// detector, once more than a small request's whole cost) is shared out instead of
	// charged to one copy, while a request that keeps more than counted still does so in
	// every copy.
	ms := make([]*compactorv1.PlanRequest, decodedCopies)
	for i := range ms {
		ms[i] = &compactorv1.PlanRequest{}
	}
	// Two collections each time: the first moves what sync.Pools hold to their victim
	// caches, the second frees it, so pooled buffers count on neither side.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, m := range ms {
		if err := d.unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ms)
	return (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / decodedCopies
}

// decodedCopies is how many times decodedSize decodes a request to measure one.
const decodedCopies = 16
