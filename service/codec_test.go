package service

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unsafe"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/cputime"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// corpusRequests returns, for every corpus conversation, one request of each kind the
// service decodes, filled with the lifted conversation and every other field set.
func corpusRequests(t *testing.T) []proto.Message {
	t.Helper()
	opts := map[string]*structpb.Struct{"anthropic": {Fields: map[string]*structpb.Value{
		"cache_control": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("ephemeral")}}),
		"list":          structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("é"), structpb.NewNumberValue(1)}}),
	}}}
	var out []proto.Message
	for _, f := range corpus.Files(t) {
		body := string(corpus.Read(t, f))
		lifted, err := format.Lift(&compactorv1.LiftRequest{Body: body})
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		msgs := lifted.GetMessages()
		msgs[0].ProviderOptions = opts
		policy := &compactorv1.Policy{ContextWindow: 200_000, Tokenizer: "cl100k_base",
			Prune: &compactorv1.PrunePolicy{ExcludeTools: []string{"bash", "read_file"}}}
		out = append(out,
			&compactorv1.PlanRequest{Messages: msgs, Policy: policy},
			&compactorv1.CompactRequest{Messages: msgs, Policy: policy, Summarizer: "extractive", Instructions: "keep the file names"},
			&compactorv1.LowerRequest{Messages: msgs, Model: "claude-sonnet-4-5", BaseBody: lifted.GetRestBody(),
				Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES},
			&compactorv1.LiftRequest{Body: body},
			lifted,
		)
	}
	return out
}

func TestCodecRoundTripsCorpusRequests(t *testing.T) {
	c := newCodec(admitAll{})
	for _, req := range corpusRequests(t) {
		wire, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got := req.ProtoReflect().New().Interface()
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, got); err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		if !proto.Equal(got, req) {
			t.Fatalf("%T: decoded message differs from the one encoded", req)
		}
		enc, err := c.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		back := req.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(enc.Materialize(), back); err != nil {
			t.Fatalf("%T: the protobuf runtime cannot decode the codec's encoding: %v", req, err)
		}
		enc.Free()
		if !proto.Equal(back, req) {
			t.Fatalf("%T: codec encoding decodes to a different message", req)
		}
	}
}

// The decoded message must not point into gRPC's buffers, which are reused once Unmarshal
// returns.
func TestCodecDecodedMessageOwnsItsMemory(t *testing.T) {
	c := newCodec(admitAll{})
	for _, req := range corpusRequests(t)[:5] {
		wire, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		// Split the input over several buffers, as frames arrive.
		var in mem.BufferSlice
		for rest := bytes.Clone(wire); len(rest) > 0; {
			n := min(len(rest), 1000)
			in = append(in, mem.SliceBuffer(rest[:n]))
			rest = rest[n:]
		}
		got := req.ProtoReflect().New().Interface()
		if err := c.Unmarshal(in, got); err != nil {
			t.Fatal(err)
		}
		for _, b := range in {
			clear(b.ReadOnlyData())
		}
		if !proto.Equal(got, req) {
			t.Fatalf("%T changed when the input buffers were overwritten", req)
		}
	}
}

// A LowerResponse is encoded to the bytes the protobuf runtime writes, with a large body
// handed to gRPC by reference instead of copied.
func TestCodecMarshalsLowerResponse(t *testing.T) {
	c := newCodec(admitAll{})
	long := strings.Repeat(`{"role":"user","content":"é"}`, 400)
	for _, tt := range []struct {
		name string
		resp *compactorv1.LowerResponse
	}{
		{"empty", &compactorv1.LowerResponse{}},
		{"short body", &compactorv1.LowerResponse{Body: `{"messages":[]}`, Cursor: 3}},
		{"body at the threshold", &compactorv1.LowerResponse{Body: long[:bodyByReference]}},
		{"long body only", &compactorv1.LowerResponse{Body: long}},
		{"long body, warnings and cursor", &compactorv1.LowerResponse{Body: long, Warnings: []string{"a", "é"}, Cursor: 41}},
		{"cursor -1", &compactorv1.LowerResponse{Body: long, Cursor: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := c.Marshal(tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Free()
			if got := enc.Materialize(); !bytes.Equal(got, want) {
				t.Fatalf("encoding differs from the protobuf runtime's:\ngot  %q\nwant %q", trunc(got), trunc(want))
			}
			byRef := false
			for _, b := range enc {
				d := b.ReadOnlyData()
				byRef = byRef || (len(d) > 0 && len(tt.resp.Body) > 0 && &d[0] == unsafe.StringData(tt.resp.Body))
			}
			if wantRef := len(tt.resp.Body) >= bodyByReference; byRef != wantRef {
				t.Errorf("body handed by reference: %v, want %v", byRef, wantRef)
			}
		})
	}
}

func trunc(b []byte) []byte { return b[:min(len(b), 80)] }

func TestCodecFallsBackForOtherMessages(t *testing.T) {
	c := newCodec(admitAll{})
	in := &healthpb.HealthCheckRequest{Service: "compactor.v1.CompactorService"}
	enc, err := c.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &healthpb.HealthCheckRequest{}
	if err := c.Unmarshal(enc, out); err != nil || !proto.Equal(in, out) {
		t.Fatalf("health request: %v, %v", out, err)
	}
}

// stringSite is a string field reachable from a request type, with the path the codec
// reports for it.
type stringSite struct {
	path string
	set  func(m protoreflect.Message, v string) // fills the path in a fresh request
}

// stringSites lists every string field reachable from md (map keys included), each message
// type entered at most twice along a path so that recursive types end.
func stringSites(md protoreflect.MessageDescriptor, depth map[protoreflect.FullName]int) []stringSite {
	if depth[md.FullName()] >= 2 {
		return nil
	}
	depth[md.FullName()]++
	defer func() { depth[md.FullName()]-- }()
	var out []stringSite
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		switch {
		case fd.IsMap():
			key, val := fd.MapKey(), fd.MapValue()
			if key.Kind() == protoreflect.StringKind {
				out = append(out, stringSite{name + "[0].key", func(m protoreflect.Message, v string) {
					m.Mutable(fd).Map().Set(protoreflect.ValueOfString(v).MapKey(), m.Mutable(fd).Map().NewValue())
				}})
			}
			switch val.Kind() {
			case protoreflect.StringKind:
				out = append(out, stringSite{name + "[0].value", func(m protoreflect.Message, v string) {
					m.Mutable(fd).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString(v))
				}})
			case protoreflect.MessageKind:
				for _, s := range stringSites(val.Message(), depth) {
					out = append(out, stringSite{name + "[0].value." + s.path, func(m protoreflect.Message, v string) {
						mp := m.Mutable(fd).Map()
						e := mp.NewValue()
						s.set(e.Message(), v)
						mp.Set(protoreflect.ValueOfString("k").MapKey(), e)
					}})
				}
			}
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			out = append(out, stringSite{name + "[0]", func(m protoreflect.Message, v string) {
				m.Mutable(fd).List().Append(protoreflect.ValueOfString(v))
			}})
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			for _, s := range stringSites(fd.Message(), depth) {
				out = append(out, stringSite{name + "[0]." + s.path, func(m protoreflect.Message, v string) {
					l := m.Mutable(fd).List()
					e := l.NewElement()
					s.set(e.Message(), v)
					l.Append(e)
				}})
			}
		case fd.Kind() == protoreflect.StringKind:
			out = append(out, stringSite{name, func(m protoreflect.Message, v string) {
				m.Set(fd, protoreflect.ValueOfString(v))
			}})
		case fd.Kind() == protoreflect.MessageKind:
			for _, s := range stringSites(fd.Message(), depth) {
				out = append(out, stringSite{name + "." + s.path, func(m protoreflect.Message, v string) {
					s.set(m.Mutable(fd).Message(), v)
				}})
			}
		}
	}
	return out
}

// Every string field of every request, however deep (parts, tool outputs, provider options'
// Struct keys and values), is checked, and the error names it.
func TestCodecRejectsInvalidUTF8InEveryStringField(t *testing.T) {
	const marker = "@@not-utf8@@"
	c := newCodec(admitAll{})
	for _, req := range []proto.Message{
		&compactorv1.PlanRequest{}, &compactorv1.CompactRequest{},
		&compactorv1.LowerRequest{}, &compactorv1.LiftRequest{},
	} {
		md := req.ProtoReflect().Descriptor()
		sites := stringSites(md, map[protoreflect.FullName]int{})
		if len(sites) == 0 || md.FullName() == "compactor.v1.PlanRequest" && len(sites) < 30 {
			t.Fatalf("%s: only %d string fields found", md.FullName(), len(sites))
		}
		for _, s := range sites {
			m := req.ProtoReflect().New()
			s.set(m, marker)
			wire, err := proto.Marshal(m.Interface())
			if err != nil {
				t.Fatalf("%s.%s: %v", md.FullName(), s.path, err)
			}
			i := bytes.Index(wire, []byte(marker))
			if i < 0 || bytes.Count(wire, []byte(marker)) != 1 {
				t.Fatalf("%s.%s: marker not found once in the encoding", md.FullName(), s.path)
			}
			wire[i] = 0xff // same length, no longer UTF-8
			if err := proto.Unmarshal(wire, req.ProtoReflect().New().Interface()); err == nil {
				t.Fatalf("%s.%s: the protobuf runtime accepts the input; the test is wrong", md.FullName(), s.path)
			}
			got := req.ProtoReflect().New().Interface()
			err = c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, got)
			var ve *engine.ValidationError
			if !errors.As(err, &ve) || len(ve.Violations) != 1 {
				t.Errorf("%s.%s: invalid UTF-8 accepted (%v)", md.FullName(), s.path, err)
				continue
			}
			if v := ve.Violations[0]; v.Field != s.path || v.Description != "string field contains invalid UTF-8" {
				t.Errorf("%s: violation %+v, want one naming %s", md.FullName(), v, s.path)
			}
			// The same bytes in a valid string decode.
			wire[i] = '@'
			got = req.ProtoReflect().New().Interface()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, got); err != nil {
				t.Errorf("%s.%s: valid input rejected: %v", md.FullName(), s.path, err)
			}
		}
	}
}

// Bytes fields may hold anything, and the error path counts repeated fields.
func TestCodecUTF8Paths(t *testing.T) {
	c := newCodec(admitAll{})
	req := &compactorv1.PlanRequest{Messages: []*compactorv1.Message{
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_Image{Image: &compactorv1.ImagePart{Source: &compactorv1.ImagePart_Data{Data: []byte{0xff, 0xfe, 0x80}}}}},
		}},
		{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "fine"}}},
			{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "xx-bad-xx"}}},
		}},
	}}
	wire, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bytes.Clone(wire))}, &compactorv1.PlanRequest{}); err != nil {
		t.Fatalf("binary image data rejected: %v", err)
	}
	wire[bytes.Index(wire, []byte("-bad-"))] = 0xc0
	var got compactorv1.PlanRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &got); err == nil || !strings.HasPrefix(err.Error(), "messages[1].parts[1].text.text: ") {
		t.Fatalf("error %v, want one naming messages[1].parts[1].text.text", err)
	}
}

// BenchmarkCodecUnmarshal decodes the load test's 20-message Plan request as the server
// does (UTF-8 check, generated decoder), against the protobuf runtime's codec.
func BenchmarkCodecUnmarshal(b *testing.B) {
	lifted, err := format.Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(b, corpus.Named(b, corpus.LoadTestConversation)))})
	if err != nil {
		b.Fatal(err)
	}
	req := &compactorv1.PlanRequest{Messages: lifted.GetMessages()[:20], Policy: &compactorv1.Policy{ContextWindow: 200_000}}
	wire, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	// Frames of at most 16 KiB, as HTTP/2 delivers them.
	var data mem.BufferSlice
	for rest := wire; len(rest) > 0; {
		n := min(len(rest), 16<<10)
		data = append(data, mem.SliceBuffer(rest[:n]))
		rest = rest[n:]
	}
	for _, bc := range []struct {
		name  string
		codec interface {
			Unmarshal(mem.BufferSlice, any) error
		}
	}{{"compactord", newCodec(admitAll{})}, {"grpc-proto", encoding.GetCodecV2("proto")}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(wire)))
			cputime.Loop(b, func() {
				if err := bc.codec.Unmarshal(data, &compactorv1.PlanRequest{}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
