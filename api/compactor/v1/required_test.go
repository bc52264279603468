package compactorv1_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/service"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// required reports whether fd carries (google.api.field_behavior) = REQUIRED.
func required(fd protoreflect.FieldDescriptor) bool {
	for _, b := range proto.GetExtension(fd.Options(), annotations.E_FieldBehavior).([]annotations.FieldBehavior) {
		if b == annotations.FieldBehavior_REQUIRED {
			return true
		}
	}
	return false
}

// site is one REQUIRED field set in a request: the path the server's BadRequest names it by
// ("messages[2].parts[0].tool_call.tool_call_id") and the field.
type site struct {
	path string
	fd   protoreflect.FieldDescriptor
}

// sites lists every REQUIRED field set in m and the messages it holds, in field order, calling
// clear(i) on the i-th when clear is given.
func sites(m protoreflect.Message, prefix string, out *[]site, clear func(i int) bool) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) || fd.IsMap() {
			continue
		}
		path := prefix + string(fd.Name())
		if required(fd) {
			*out = append(*out, site{path, fd})
			if clear != nil && clear(len(*out)-1) {
				m.Clear(fd)
				continue
			}
		}
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			continue
		}
		if fd.IsList() {
			l := m.Get(fd).List()
			for j := range l.Len() {
				sites(l.Get(j).Message(), path+"["+strconv.Itoa(j)+"].", out, clear)
			}
			continue
		}
		sites(m.Get(fd).Message(), path+".", out, clear)
	}
}

// conversation holds every message and part type with a REQUIRED field, each set.
func conversation(t *testing.T) []*compactorv1.Message {
	text := func(s string) *compactorv1.Part {
		return &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}
	}
	file := &compactorv1.FilePart{Source: &compactorv1.FilePart_Url{Url: "https://example.com/spec.pdf"}, MediaType: "application/pdf"}
	opts, err := structpb.NewStruct(map[string]any{"cacheControl": map[string]any{"type": "ephemeral"}})
	if err != nil {
		t.Fatal(err)
	}
	return []*compactorv1.Message{
		{Role: compactorv1.Role_ROLE_SYSTEM, Parts: []*compactorv1.Part{text("You are terse.")}},
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{
			text("Read the spec and list the files."),
			{Content: &compactorv1.Part_File{File: proto.Clone(file).(*compactorv1.FilePart)}},
		}, ProviderOptions: map[string]*structpb.Struct{"anthropic": opts}},
		{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{ToolCallId: "call_1", ToolName: "bash", InputJson: `{"cmd":"ls"}`}}},
			{Content: &compactorv1.Part_ApprovalRequest{ApprovalRequest: &compactorv1.ToolApprovalRequest{ApprovalId: "appr_1", ToolCallId: "call_1"}}},
		}},
		{Role: compactorv1.Role_ROLE_TOOL, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_ApprovalResponse{ApprovalResponse: &compactorv1.ToolApprovalResponse{ApprovalId: "appr_1", Approved: true}}},
			{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{ToolCallId: "call_1", ToolName: "bash",
				Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: []*compactorv1.Part{
					text("main.go spec.pdf"),
					{Content: &compactorv1.Part_File{File: proto.Clone(file).(*compactorv1.FilePart)}},
				}}}}}}},
		}},
		{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_Provider{Provider: &compactorv1.ProviderPart{Provider: "anthropic", Type: "compaction", Json: `{"type":"compaction","content":"earlier turns"}`}}},
			text("main.go and spec.pdf."),
		}},
	}
}

// TestRequiredFieldsAreValidated holds every field the API marks REQUIRED to the server's
// answer: each request below is valid, and with any one REQUIRED field in it cleared the RPC
// fails with INVALID_ARGUMENT and a BadRequest naming that field (or, for a message, a field
// inside it). Between them the requests set every REQUIRED field the API has.
func TestRequiredFieldsAreValidated(t *testing.T) {
	srv := service.New(service.Options{})
	ctx := context.Background()
	policy := &compactorv1.Policy{ContextWindow: 100000}
	body := `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"What is 2+2?"}]}`
	rpcs := []struct {
		name string
		req  proto.Message
		call func(proto.Message) error
	}{
		{"Plan", &compactorv1.PlanRequest{Messages: conversation(t), Policy: policy}, func(r proto.Message) error {
			_, err := srv.Plan(ctx, r.(*compactorv1.PlanRequest))
			return err
		}},
		{"Compact", &compactorv1.CompactRequest{Messages: conversation(t), Policy: policy, Force: true}, func(r proto.Message) error {
			_, err := srv.Compact(ctx, r.(*compactorv1.CompactRequest))
			return err
		}},
		{"Lower", &compactorv1.LowerRequest{Messages: conversation(t), Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, Tools: []*compactorv1.Tool{
			{Name: "bash", InputSchemaJson: `{"type":"object","properties":{"cmd":{"type":"string"}}}`},
			{Name: "web_search", ProviderTool: &compactorv1.ProviderTool{Format: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES,
				Type: "web_search_20250305", Json: `{"type":"web_search_20250305","name":"web_search"}`}},
		}}, func(r proto.Message) error {
			_, err := srv.Lower(ctx, r.(*compactorv1.LowerRequest))
			return err
		}},
		{"Lift", &compactorv1.LiftRequest{Body: body}, func(r proto.Message) error {
			_, err := srv.Lift(ctx, r.(*compactorv1.LiftRequest))
			return err
		}},
	}
	covered := map[protoreflect.FullName]bool{}
	for _, rpc := range rpcs {
		t.Run(rpc.name, func(t *testing.T) {
			if err := rpc.call(rpc.req); err != nil {
				t.Fatalf("the valid request failed: %v", err)
			}
			var all []site
			sites(rpc.req.ProtoReflect(), "", &all, nil)
			for i, s := range all {
				covered[s.fd.FullName()] = true
				req := proto.Clone(rpc.req)
				var again []site
				sites(req.ProtoReflect(), "", &again, func(j int) bool { return j == i })
				err := rpc.call(req)
				if status.Code(err) != codes.InvalidArgument {
					t.Errorf("%s cleared: %v, want INVALID_ARGUMENT", s.path, err)
					continue
				}
				if fields := violations(err); !names(fields, s.path) {
					t.Errorf("%s cleared: the BadRequest names %q, not the field", s.path, fields)
				}
			}
		})
	}
	for _, fd := range requiredFields(t) {
		if !covered[fd.FullName()] {
			t.Errorf("REQUIRED field %s is set in none of the requests above: add it", fd.FullName())
		}
	}
}

// violations returns the fields a status error's BadRequest names.
func violations(err error) []string {
	var out []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out = append(out, v.GetField())
			}
		}
	}
	return out
}

// names reports whether one of fields is path or a field inside it.
func names(fields []string, path string) bool {
	for _, f := range fields {
		if f == path || strings.HasPrefix(f, path+".") {
			return true
		}
	}
	return false
}

// requiredFields lists the REQUIRED fields of every message of the API's files.
func requiredFields(t *testing.T) []protoreflect.FieldDescriptor {
	var out []protoreflect.FieldDescriptor
	var walk func(ms protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			fields := ms.Get(i).Fields()
			for j := range fields.Len() {
				if required(fields.Get(j)) {
					out = append(out, fields.Get(j))
				}
			}
			walk(ms.Get(i).Messages())
		}
	}
	walk(compactorv1.File_compactor_v1_compactor_proto.Messages())
	walk(compactorv1.File_compactor_v1_conversation_proto.Messages())
	if len(out) == 0 {
		t.Fatal("no field of the API is marked REQUIRED")
	}
	return out
}

// fieldDecl matches a field declaration of a .proto file: its name and options.
var fieldDecl = regexp.MustCompile(`^\s*(?:repeated\s+|optional\s+)?[\w.<>, ]+\s+(\w+)\s*=\s*\d+\s*(\[.*\])?;`)

// TestRequiredFieldsAreDocumented keeps the comments and the annotations in step: a field
// whose comment says it is required ("Required." or "Required:" or "Required;", or "At least
// one ... is required") is marked REQUIRED, and a field marked REQUIRED says so.
func TestRequiredFieldsAreDocumented(t *testing.T) {
	says := regexp.MustCompile(`\bRequired[.;:]|\bis required\b`)
	for _, file := range []string{"compactor.proto", "conversation.proto"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var comment []string
		for n, line := range strings.Split(string(b), "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(line), "//"); ok {
				comment = append(comment, c)
				continue
			}
			m := fieldDecl.FindStringSubmatch(line)
			doc := strings.Join(comment, " ")
			comment = nil
			if m == nil {
				continue
			}
			marked := strings.Contains(m[2], "(google.api.field_behavior) = REQUIRED")
			switch documented := says.MatchString(doc); {
			case documented && !marked:
				t.Errorf("%s:%d: %s is documented as required but not marked REQUIRED", file, n+1, m[1])
			case marked && !documented:
				t.Errorf("%s:%d: %s is marked REQUIRED but its comment does not say so", file, n+1, m[1])
			}
		}
	}
}
