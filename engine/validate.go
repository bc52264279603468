package engine

import (
	"fmt"
	"strconv"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Limits bounds the size of a conversation. A zero field means no limit.
type Limits struct {
	// MaxMessages is the most messages a conversation may hold.
	MaxMessages int
	// MaxParts is the most parts one message may hold (tool content parts included).
	MaxParts int
	// MaxPartBytes is the largest text, JSON or media payload one part may carry.
	MaxPartBytes int
	// MaxViolations caps how many violations one ValidationError lists; further ones are
	// summarized in a last entry. Zero means 100.
	MaxViolations int
}

// DefaultLimits returns the limits the service applies unless configured otherwise.
func DefaultLimits() Limits {
	return Limits{MaxMessages: 10000, MaxParts: 1000, MaxPartBytes: 8 << 20, MaxViolations: 100}
}

// Validate checks msgs against every structural rule of the IR under DefaultLimits.
// See Limits.Validate.
func Validate(msgs []*compactorv1.Message) error {
	return DefaultLimits().Validate(msgs)
}

// Validate checks msgs against every structural rule of the IR and returns nil or a
// *ValidationError listing each violation with its field path
// ("messages[3].parts[1].tool_result.tool_call_id"). Size-limit violations are reported
// alone, before any structural check, in a ValidationError with Limit set.
//
// The rules: a conversation has at least one message; every message has a known role and at
// least one part; each role holds only its part types (system: text; user: text, image, file;
// assistant: text, reasoning, image, file, tool call, approval request, and results of its own
// provider-executed calls; tool: tool result, approval response); message ids, when set, are
// unique; every tool call has an id and a name, and its id is not reused while an earlier call
// with that id is unanswered; every tool result answers the nearest earlier unanswered call with
// its id; approval requests name a known call and have unique ids; approval responses answer
// an earlier, unanswered approval request; images and files have a source; compaction
// artifacts hold text only.
func (l Limits) Validate(msgs []*compactorv1.Message) error {
	if err := l.checkSize(msgs); err != nil {
		return err
	}
	v := validator{
		max:       l.MaxViolations,
		ids:       make(map[string]int, len(msgs)),
		calls:     make(map[string]*callState),
		approvals: make(map[string]*approvalState),
	}
	if v.max <= 0 {
		v.max = 100
	}
	if len(msgs) == 0 {
		v.add("messages", "empty conversation: at least one message is required")
	}
	for i, m := range msgs {
		v.message(i, m)
	}
	return v.err()
}

func (l Limits) checkSize(msgs []*compactorv1.Message) error {
	if l.MaxMessages > 0 && len(msgs) > l.MaxMessages {
		return &ValidationError{Limit: true, Violations: []FieldViolation{{
			Field:       "messages",
			Description: fmt.Sprintf("%d messages exceed the limit of %d", len(msgs), l.MaxMessages),
		}}}
	}
	var out []FieldViolation
	for i, m := range msgs {
		if l.MaxParts > 0 && len(m.GetParts()) > l.MaxParts {
			out = append(out, FieldViolation{
				Field:       "messages[" + strconv.Itoa(i) + "].parts",
				Description: fmt.Sprintf("%d parts exceed the limit of %d", len(m.GetParts()), l.MaxParts),
			})
			continue
		}
		if l.MaxPartBytes <= 0 {
			continue
		}
		for j, p := range m.GetParts() {
			if n := partBytes(p); n > l.MaxPartBytes {
				out = append(out, FieldViolation{
					Field:       "messages[" + strconv.Itoa(i) + "].parts[" + strconv.Itoa(j) + "]",
					Description: fmt.Sprintf("%d bytes exceed the part limit of %d", n, l.MaxPartBytes),
				})
			}
		}
	}
	if out != nil {
		return &ValidationError{Limit: true, Violations: out}
	}
	return nil
}

// partBytes is the size of a part's payload.
func partBytes(p *compactorv1.Part) int {
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		return len(c.Text.GetText())
	case *compactorv1.Part_Image:
		return len(c.Image.GetData()) + len(c.Image.GetUrl())
	case *compactorv1.Part_File:
		return len(c.File.GetData()) + len(c.File.GetUrl())
	case *compactorv1.Part_Reasoning:
		r := c.Reasoning
		return len(r.GetText()) + len(r.GetSignature()) + len(r.GetRedactedData())
	case *compactorv1.Part_ToolCall:
		return len(c.ToolCall.GetInputJson())
	case *compactorv1.Part_ToolResult:
		o := c.ToolResult.GetOutput()
		n := len(o.GetText()) + len(o.GetJson()) + len(o.GetErrorText()) + len(o.GetErrorJson()) + len(o.GetDenied())
		for _, cp := range o.GetContent().GetParts() {
			n += partBytes(cp)
		}
		return n
	}
	return 0
}

// callState tracks one tool call id while validating.
type callState struct {
	msg      int  // message index of the latest call with this id
	answered bool // whether that call has a result yet
	executed bool // provider-executed
}

type approvalState struct {
	answered bool
}

type validator struct {
	max        int
	violations []FieldViolation
	dropped    int
	ids        map[string]int
	calls      map[string]*callState
	approvals  map[string]*approvalState
}

func (v *validator) add(field, desc string) {
	if len(v.violations) >= v.max {
		v.dropped++
		return
	}
	v.violations = append(v.violations, FieldViolation{Field: field, Description: desc})
}

func (v *validator) err() error {
	if len(v.violations) == 0 {
		return nil
	}
	if v.dropped > 0 {
		v.violations = append(v.violations, FieldViolation{
			Field:       "messages",
			Description: fmt.Sprintf("%d more violations not listed", v.dropped),
		})
	}
	return &ValidationError{Violations: v.violations}
}

// allowed reports whether role may hold a part of the given content type.
func allowed(role compactorv1.Role, p *compactorv1.Part) bool {
	switch p.GetContent().(type) {
	case *compactorv1.Part_Text:
		return role != compactorv1.Role_ROLE_TOOL
	case *compactorv1.Part_Image, *compactorv1.Part_File:
		return role == compactorv1.Role_ROLE_USER || role == compactorv1.Role_ROLE_ASSISTANT
	case *compactorv1.Part_Reasoning, *compactorv1.Part_ToolCall, *compactorv1.Part_ApprovalRequest:
		return role == compactorv1.Role_ROLE_ASSISTANT
	case *compactorv1.Part_ToolResult:
		return role == compactorv1.Role_ROLE_TOOL || role == compactorv1.Role_ROLE_ASSISTANT
	case *compactorv1.Part_ApprovalResponse:
		return role == compactorv1.Role_ROLE_TOOL
	}
	return false
}

func (v *validator) message(i int, m *compactorv1.Message) {
	path := "messages[" + strconv.Itoa(i) + "]"
	if m == nil {
		v.add(path, "null message")
		return
	}
	role := m.GetRole()
	switch role {
	case compactorv1.Role_ROLE_SYSTEM, compactorv1.Role_ROLE_USER, compactorv1.Role_ROLE_ASSISTANT, compactorv1.Role_ROLE_TOOL:
	case compactorv1.Role_ROLE_UNSPECIFIED:
		v.add(path+".role", "role is required")
	default:
		v.add(path+".role", fmt.Sprintf("unknown role %d", int32(role)))
	}
	if id := m.GetId(); id != "" {
		if first, dup := v.ids[id]; dup {
			v.add(path+".id", fmt.Sprintf("duplicate message id %q (first at messages[%d])", id, first))
		} else {
			v.ids[id] = i
		}
	}
	switch k := m.GetKind(); k {
	case compactorv1.MessageKind_MESSAGE_KIND_UNSPECIFIED:
	case compactorv1.MessageKind_MESSAGE_KIND_SESSION_PREFACE:
		if role != compactorv1.Role_ROLE_USER && role != compactorv1.Role_ROLE_SYSTEM {
			v.add(path+".kind", "a session preface must have role USER or SYSTEM")
		}
	case compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY:
		if role != compactorv1.Role_ROLE_USER && role != compactorv1.Role_ROLE_ASSISTANT {
			v.add(path+".kind", "a compaction prompt or summary must have role USER or ASSISTANT")
		}
		for j, p := range m.GetParts() {
			if p.GetText() == nil {
				v.add(path+".parts["+strconv.Itoa(j)+"]", "a compaction prompt or summary holds text parts only")
			}
		}
	default:
		v.add(path+".kind", fmt.Sprintf("unknown message kind %d", int32(k)))
	}
	switch lc := m.GetLifecycle(); lc {
	case compactorv1.Lifecycle_LIFECYCLE_UNSPECIFIED:
	case compactorv1.Lifecycle_LIFECYCLE_DYNAMIC:
		if role != compactorv1.Role_ROLE_SYSTEM {
			v.add(path+".lifecycle", "DYNAMIC applies to system messages only")
		}
	default:
		v.add(path+".lifecycle", fmt.Sprintf("unknown lifecycle %d", int32(lc)))
	}
	if len(m.GetParts()) == 0 {
		v.add(path+".parts", "a message needs at least one part")
		return
	}
	for j, p := range m.GetParts() {
		v.part(path+".parts["+strconv.Itoa(j)+"]", i, role, p)
	}
}

func (v *validator) part(path string, msg int, role compactorv1.Role, p *compactorv1.Part) {
	if p == nil || p.GetContent() == nil {
		v.add(path, "empty part: exactly one content field must be set")
		return
	}
	known := role >= compactorv1.Role_ROLE_SYSTEM && role <= compactorv1.Role_ROLE_TOOL
	if known && !allowed(role, p) {
		v.add(path, fmt.Sprintf("a %s message cannot hold a %s part", roleName(role), partName(p)))
		return
	}
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Image:
		v.image(path+".image", c.Image)
	case *compactorv1.Part_File:
		v.file(path+".file", c.File)
	case *compactorv1.Part_ToolCall:
		v.toolCall(path+".tool_call", msg, c.ToolCall)
	case *compactorv1.Part_ToolResult:
		v.toolResult(path+".tool_result", msg, role, c.ToolResult)
	case *compactorv1.Part_ApprovalRequest:
		v.approvalRequest(path+".approval_request", c.ApprovalRequest)
	case *compactorv1.Part_ApprovalResponse:
		v.approvalResponse(path+".approval_response", c.ApprovalResponse)
	}
}

func (v *validator) image(path string, img *compactorv1.ImagePart) {
	switch s := img.GetSource().(type) {
	case nil:
		v.add(path, "an image needs data or url")
	case *compactorv1.ImagePart_Data:
		if len(s.Data) == 0 {
			v.add(path+".data", "empty image data")
		}
	case *compactorv1.ImagePart_Url:
		if s.Url == "" {
			v.add(path+".url", "empty image url")
		}
	}
}

func (v *validator) file(path string, f *compactorv1.FilePart) {
	switch s := f.GetSource().(type) {
	case nil:
		v.add(path, "a file needs data or url")
	case *compactorv1.FilePart_Data:
		if len(s.Data) == 0 {
			v.add(path+".data", "empty file data")
		}
	case *compactorv1.FilePart_Url:
		if s.Url == "" {
			v.add(path+".url", "empty file url")
		}
	}
	if f.GetMediaType() == "" {
		v.add(path+".media_type", "a file needs a media type")
	}
}

func (v *validator) toolCall(path string, msg int, c *compactorv1.ToolCallPart) {
	if c.GetToolName() == "" {
		v.add(path+".tool_name", "a tool call needs a tool name")
	}
	id := c.GetToolCallId()
	if id == "" {
		v.add(path+".tool_call_id", "a tool call needs an id")
		return
	}
	if st, ok := v.calls[id]; ok && !st.answered {
		v.add(path+".tool_call_id", fmt.Sprintf("duplicate tool call id %q: the call in messages[%d] is not answered yet", id, st.msg))
		return
	}
	v.calls[id] = &callState{msg: msg, executed: c.GetProviderExecuted()}
}

func (v *validator) toolResult(path string, msg int, role compactorv1.Role, r *compactorv1.ToolResultPart) {
	id := r.GetToolCallId()
	switch st, ok := v.calls[id]; {
	case id == "":
		v.add(path+".tool_call_id", "a tool result needs the id of the call it answers")
	case !ok:
		v.add(path+".tool_call_id", fmt.Sprintf("no earlier tool call with id %q", id))
	case st.answered:
		v.add(path+".tool_call_id", fmt.Sprintf("the tool call %q in messages[%d] is already answered", id, st.msg))
	case role == compactorv1.Role_ROLE_ASSISTANT && !(st.executed && st.msg == msg):
		v.add(path, "an assistant message holds only results of its own provider-executed tool calls")
	default:
		st.answered = true
	}
	o := r.GetOutput()
	if o == nil || o.GetValue() == nil {
		v.add(path+".output", "a tool result needs an output")
		return
	}
	if c, ok := o.GetValue().(*compactorv1.ToolOutput_Content); ok {
		for k, p := range c.Content.GetParts() {
			pp := path + ".output.content.parts[" + strconv.Itoa(k) + "]"
			switch pc := p.GetContent().(type) {
			case *compactorv1.Part_Text:
			case *compactorv1.Part_Image:
				v.image(pp+".image", pc.Image)
			case *compactorv1.Part_File:
				v.file(pp+".file", pc.File)
			case nil:
				v.add(pp, "empty part: exactly one content field must be set")
			default:
				v.add(pp, fmt.Sprintf("tool output content holds only text, image and file parts, not %s", partName(p)))
			}
		}
	}
}

func (v *validator) approvalRequest(path string, a *compactorv1.ToolApprovalRequest) {
	id := a.GetApprovalId()
	if id == "" {
		v.add(path+".approval_id", "an approval request needs an id")
	} else if _, dup := v.approvals[id]; dup {
		v.add(path+".approval_id", fmt.Sprintf("duplicate approval id %q", id))
	} else {
		v.approvals[id] = &approvalState{}
	}
	if _, ok := v.calls[a.GetToolCallId()]; !ok {
		v.add(path+".tool_call_id", fmt.Sprintf("no tool call with id %q in this or an earlier message", a.GetToolCallId()))
	}
}

func (v *validator) approvalResponse(path string, a *compactorv1.ToolApprovalResponse) {
	id := a.GetApprovalId()
	st, ok := v.approvals[id]
	switch {
	case id == "":
		v.add(path+".approval_id", "an approval response needs the id of the request it answers")
	case !ok:
		v.add(path+".approval_id", fmt.Sprintf("no earlier approval request with id %q", id))
	case st.answered:
		v.add(path+".approval_id", fmt.Sprintf("approval %q is already answered", id))
	default:
		st.answered = true
	}
}

func roleName(r compactorv1.Role) string {
	switch r {
	case compactorv1.Role_ROLE_SYSTEM:
		return "system"
	case compactorv1.Role_ROLE_USER:
		return "user"
	case compactorv1.Role_ROLE_ASSISTANT:
		return "assistant"
	case compactorv1.Role_ROLE_TOOL:
		return "tool"
	}
	return "unspecified-role"
}

func partName(p *compactorv1.Part) string {
	switch p.GetContent().(type) {
	case *compactorv1.Part_Text:
		return "text"
	case *compactorv1.Part_Image:
		return "image"
	case *compactorv1.Part_File:
		return "file"
	case *compactorv1.Part_Reasoning:
		return "reasoning"
	case *compactorv1.Part_ToolCall:
		return "tool_call"
	case *compactorv1.Part_ToolResult:
		return "tool_result"
	case *compactorv1.Part_ApprovalRequest:
		return "approval_request"
	case *compactorv1.Part_ApprovalResponse:
		return "approval_response"
	}
	return "empty"
}
