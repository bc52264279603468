package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/protoset"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// corpusDir finds the real corpus the way internal/corpus does: COMPACTORD_CORPUS, else
// the conversations copied into the repository (internal/corpus/testdata/real under
// repoRoot). The load test's payloads are cut from it.
func corpusDir(repoRoot string) (string, error) {
	if d := os.Getenv("COMPACTORD_CORPUS"); d != "" {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", fmt.Errorf("COMPACTORD_CORPUS=%s is not a directory of corpus conversations", d)
		}
		return d, nil
	}
	d := filepath.Join(repoRoot, "internal", "corpus", "testdata", "real")
	if _, err := os.Stat(d); err != nil {
		return "", fmt.Errorf("the load test builds its requests from the real corpus of agent conversations: %w", err)
	}
	return d, nil
}

// descriptorSet is a serialized FileDescriptorSet with the compactor and health services and
// everything they import, so ghz needs neither reflection nor .proto files.
func descriptorSet() ([]byte, error) {
	set := protoset.Build(compactorv1.File_compactor_v1_compactor_proto, healthpb.File_grpc_health_v1_health_proto)
	return proto.Marshal(set)
}

// methodTypes returns the input and output message types of a call "pkg.Service/Method".
func methodTypes(call string) (in, out protoreflect.MessageType, err error) {
	svc, mname, ok := strings.Cut(call, "/")
	if !ok {
		return nil, nil, fmt.Errorf("call %q: no method", call)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, nil, fmt.Errorf("call %q: %w", call, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, nil, fmt.Errorf("call %q: %s is not a service", call, svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(mname))
	if md == nil {
		return nil, nil, fmt.Errorf("call %q: no method %s", call, mname)
	}
	if md.IsStreamingClient() || md.IsStreamingServer() {
		return nil, nil, fmt.Errorf("call %q: streaming methods are not supported", call)
	}
	in, err = protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, nil, err
	}
	out, err = protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	return in, out, err
}

// turnCut returns the largest k <= n such that msgs[:k] ends at a turn boundary: every tool
// call and approval request in it is answered inside it, and msgs[k] (if any) is not a tool
// message. n <= 0 or n >= len(msgs) keeps everything.
func turnCut(msgs []*compactorv1.Message, n int) (int, error) {
	if n <= 0 || n >= len(msgs) {
		return len(msgs), nil
	}
	open := map[string]bool{}
	best := 0
	for i, m := range msgs[:n] {
		for _, p := range m.GetParts() {
			switch {
			case p.GetToolCall() != nil:
				open["call:"+p.GetToolCall().GetToolCallId()] = true
			case p.GetToolResult() != nil:
				delete(open, "call:"+p.GetToolResult().GetToolCallId())
			case p.GetApprovalRequest() != nil:
				open["approval:"+p.GetApprovalRequest().GetApprovalId()] = true
			case p.GetApprovalResponse() != nil:
				delete(open, "approval:"+p.GetApprovalResponse().GetApprovalId())
			}
		}
		if len(open) == 0 && msgs[i+1].GetRole() != compactorv1.Role_ROLE_TOOL {
			best = i + 1
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("no turn boundary within the first %d messages", n)
	}
	return best, nil
}

// corpusProvider is the Lift provider of a corpus file, from its name.
func corpusProvider(name string) (compactorv1.Provider, error) {
	switch {
	case strings.HasSuffix(name, ".openai.json"):
		return compactorv1.Provider_PROVIDER_OPENAI_CHAT, nil
	case strings.HasSuffix(name, ".anthropic.json"):
		return compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, nil
	}
	return 0, fmt.Errorf("corpus file %q: not *.openai.json or *.anthropic.json", name)
}

// Payload is a scenario's request, built once before the load.
type Payload struct {
	// Request is the request every call sends (for cache "miss", before it is made unique).
	Request proto.Message
	// Messages is the number of conversation messages the request carries (0 without one).
	Messages int
	// Of is the number of messages the corpus conversation has.
	Of int
	// Bytes is the size of the serialized request.
	Bytes int
}

// buildPayload builds a scenario's request: the request template, then the conversation
// lifted from the corpus by the server (cut at a turn boundary) or the raw corpus body.
func buildPayload(ctx context.Context, cc grpc.ClientConnInterface, corpus string, sc *Scenario) (*Payload, error) {
	req, err := requestTemplate(sc)
	if err != nil {
		return nil, err
	}
	inType := req.ProtoReflect().Type()
	p := &Payload{Request: req}
	fields := req.ProtoReflect().Descriptor().Fields()
	switch {
	case sc.Conversation != nil:
		fd := fields.ByName("messages")
		if fd == nil || !fd.IsList() || fd.Message() == nil || fd.Message().FullName() != "compactor.v1.Message" {
			return nil, fmt.Errorf("%s has no messages field", inType.Descriptor().FullName())
		}
		msgs, err := liftCorpus(ctx, cc, corpus, sc.Conversation.File)
		if err != nil {
			return nil, err
		}
		k, err := turnCut(msgs, sc.Conversation.Messages)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.Conversation.File, err)
		}
		p.Messages, p.Of = k, len(msgs)
		list := req.ProtoReflect().Mutable(fd).List()
		for _, m := range msgs[:k] {
			list.Append(protoreflect.ValueOfMessage(m.ProtoReflect()))
		}
	case sc.Body != nil:
		fd := fields.ByName("body")
		if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
			return nil, fmt.Errorf("%s has no body field", inType.Descriptor().FullName())
		}
		b, err := os.ReadFile(filepath.Join(corpus, sc.Body.File))
		if err != nil {
			return nil, err
		}
		req.ProtoReflect().Set(fd, protoreflect.ValueOfString(string(b)))
	}
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	p.Bytes = len(b)
	return p, nil
}

// requestTemplate is the scenario's request without its conversation or body.
func requestTemplate(sc *Scenario) (proto.Message, error) {
	inType, _, err := methodTypes(sc.Call)
	if err != nil {
		return nil, err
	}
	req := inType.New().Interface()
	js, err := sc.requestJSON()
	if err != nil {
		return nil, err
	}
	if err := protojson.Unmarshal(js, req); err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	return req, nil
}

// liftCorpus reads a corpus file into the IR through the server's Lift RPC.
func liftCorpus(ctx context.Context, cc grpc.ClientConnInterface, corpus, name string) ([]*compactorv1.Message, error) {
	prov, err := corpusProvider(name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(corpus, name))
	if err != nil {
		return nil, err
	}
	resp, err := compactorv1.NewCompactorServiceClient(cc).Lift(ctx, &compactorv1.LiftRequest{Body: string(b), Provider: prov})
	if err != nil {
		return nil, fmt.Errorf("lifting %s: %w", name, err)
	}
	if len(resp.GetMessages()) == 0 {
		return nil, fmt.Errorf("lifting %s: no messages", name)
	}
	return resp.GetMessages(), nil
}

// uniqueRequest returns a copy of req (which has a messages field) whose first user text
// starts with a marker naming n, so its prefix hash differs from every other n.
func uniqueRequest(req proto.Message, n int64) (proto.Message, error) {
	c := proto.Clone(req)
	fd := c.ProtoReflect().Descriptor().Fields().ByName("messages")
	if fd == nil {
		return nil, errors.New("request has no messages")
	}
	list := c.ProtoReflect().Get(fd).List()
	for i := 0; i < list.Len(); i++ {
		m, ok := list.Get(i).Message().Interface().(*compactorv1.Message)
		if !ok || m.GetRole() != compactorv1.Role_ROLE_USER {
			continue
		}
		for _, part := range m.GetParts() {
			if t := part.GetText(); t != nil {
				t.Text = fmt.Sprintf("[loadtest request %d] %s", n, t.Text)
				return c, nil
			}
		}
	}
	return nil, errors.New("request has no user text to make unique")
}

// writePayload writes a request as protobuf JSON (for replaying with the ghz CLI) into dir.
func writePayload(dir, name string, req proto.Message) (string, error) {
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(req)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".json")
	return path, os.WriteFile(path, b, 0o600)
}
