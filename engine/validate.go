package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

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
	v := validator{max: l.MaxViolations}
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
		return TooLarge("messages", fmt.Sprintf("%d messages exceed the limit of %d", len(msgs), l.MaxMessages))
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
	case *compactorv1.Part_Provider:
		return len(c.Provider.GetJson())
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

// loc locates a field: messages[msg], then .parts[part] when part ≥ 0, then
// .tool_result.output.content.parts[sub] when sub ≥ 0, then suffix. Paths are only rendered
// for violations, so a valid conversation costs no string building.
type loc struct {
	msg, part, sub int
}

func (l loc) path(suffix string) string {
	b := make([]byte, 0, 64)
	b = append(b, "messages["...)
	b = strconv.AppendInt(b, int64(l.msg), 10)
	b = append(b, ']')
	if l.part >= 0 {
		b = append(b, ".parts["...)
		b = strconv.AppendInt(b, int64(l.part), 10)
		b = append(b, ']')
	}
	if l.sub >= 0 {
		b = append(b, ".tool_result.output.content.parts["...)
		b = strconv.AppendInt(b, int64(l.sub), 10)
		b = append(b, ']')
	}
	return string(append(b, suffix...))
}

type validator struct {
	max        int
	violations []FieldViolation
	dropped    int
	ids        map[string]int       // message id → first index; allocated on first id
	calls      map[string]callState // tool call id → latest call
	approvals  map[string]bool      // approval id → answered
}

func (v *validator) add(field, desc string) {
	if len(v.violations) >= v.max {
		v.dropped++
		return
	}
	v.violations = append(v.violations, FieldViolation{Field: field, Description: desc})
}

// addAt adds a violation at l + suffix.
func (v *validator) addAt(l loc, suffix, desc string) {
	if len(v.violations) >= v.max {
		v.dropped++
		return
	}
	v.add(l.path(suffix), desc)
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
	case *compactorv1.Part_Provider:
		return role == compactorv1.Role_ROLE_USER || role == compactorv1.Role_ROLE_ASSISTANT
	}
	return false
}

func (v *validator) message(i int, m *compactorv1.Message) {
	at := loc{msg: i, part: -1, sub: -1}
	if m == nil {
		v.addAt(at, "", "null message")
		return
	}
	role := m.GetRole()
	switch role {
	case compactorv1.Role_ROLE_SYSTEM, compactorv1.Role_ROLE_USER, compactorv1.Role_ROLE_ASSISTANT, compactorv1.Role_ROLE_TOOL:
	case compactorv1.Role_ROLE_UNSPECIFIED:
		v.addAt(at, ".role", "role is required")
	default:
		v.addAt(at, ".role", fmt.Sprintf("unknown role %d", int32(role)))
	}
	if id := m.GetId(); id != "" {
		if first, dup := v.ids[id]; dup {
			v.addAt(at, ".id", fmt.Sprintf("duplicate message id %q (first at messages[%d])", id, first))
		} else {
			if v.ids == nil {
				v.ids = make(map[string]int)
			}
			v.ids[id] = i
		}
	}
	switch k := m.GetKind(); k {
	case compactorv1.MessageKind_MESSAGE_KIND_UNSPECIFIED:
	case compactorv1.MessageKind_MESSAGE_KIND_SESSION_PREFACE:
		if role != compactorv1.Role_ROLE_USER && role != compactorv1.Role_ROLE_SYSTEM {
			v.addAt(at, ".kind", "a session preface must have role USER or SYSTEM")
		}
	case compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY:
		if role != compactorv1.Role_ROLE_USER && role != compactorv1.Role_ROLE_ASSISTANT {
			v.addAt(at, ".kind", "a compaction prompt or summary must have role USER or ASSISTANT")
		}
		for j, p := range m.GetParts() {
			if p.GetText() == nil {
				v.addAt(loc{msg: i, part: j, sub: -1}, "", "a compaction prompt or summary holds text parts only")
			}
		}
	default:
		v.addAt(at, ".kind", fmt.Sprintf("unknown message kind %d", int32(k)))
	}
	switch lc := m.GetLifecycle(); lc {
	case compactorv1.Lifecycle_LIFECYCLE_UNSPECIFIED:
	case compactorv1.Lifecycle_LIFECYCLE_DYNAMIC:
		if role != compactorv1.Role_ROLE_SYSTEM {
			v.addAt(at, ".lifecycle", "DYNAMIC applies to system messages only")
		}
	default:
		v.addAt(at, ".lifecycle", fmt.Sprintf("unknown lifecycle %d", int32(lc)))
	}
	if len(m.GetParts()) == 0 {
		v.addAt(at, ".parts", "a message needs at least one part")
		return
	}
	for j, p := range m.GetParts() {
		v.part(loc{msg: i, part: j, sub: -1}, role, p)
	}
}

func (v *validator) part(at loc, role compactorv1.Role, p *compactorv1.Part) {
	if p == nil || p.GetContent() == nil {
		v.addAt(at, "", "empty part: exactly one content field must be set")
		return
	}
	known := role >= compactorv1.Role_ROLE_SYSTEM && role <= compactorv1.Role_ROLE_TOOL
	if known && !allowed(role, p) {
		v.addAt(at, "", fmt.Sprintf("a %s message cannot hold a %s part", roleName(role), partName(p)))
		return
	}
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Image:
		v.image(at, c.Image)
	case *compactorv1.Part_File:
		v.file(at, c.File)
	case *compactorv1.Part_ToolCall:
		v.toolCall(at, c.ToolCall)
	case *compactorv1.Part_ToolResult:
		v.toolResult(at, role, c.ToolResult)
	case *compactorv1.Part_ApprovalRequest:
		v.approvalRequest(at, c.ApprovalRequest)
	case *compactorv1.Part_ApprovalResponse:
		v.approvalResponse(at, c.ApprovalResponse)
	case *compactorv1.Part_Provider:
		v.providerPart(at, c.Provider)
	}
}

// providerPart checks a provider part: a known provider, a type, and a JSON object.
func (v *validator) providerPart(at loc, p *compactorv1.ProviderPart) {
	switch p.GetProvider() {
	case ProviderAnthropic, ProviderOpenAI:
	default:
		v.addAt(at, ".provider.provider", fmt.Sprintf("unknown provider %q: expected %q or %q", p.GetProvider(), ProviderAnthropic, ProviderOpenAI))
	}
	if p.GetType() == "" {
		v.addAt(at, ".provider.type", "required")
	}
	if j := strings.TrimSpace(p.GetJson()); !strings.HasPrefix(j, "{") || !json.Valid([]byte(j)) {
		v.addAt(at, ".provider.json", "must be a JSON object")
	}
	if p.GetTokenCount() < 0 {
		v.addAt(at, ".provider.token_count", "must not be negative")
	}
}

func (v *validator) image(at loc, img *compactorv1.ImagePart) {
	switch s := img.GetSource().(type) {
	case nil:
		v.addAt(at, ".image", "an image needs data or url")
	case *compactorv1.ImagePart_Data:
		if len(s.Data) == 0 {
			v.addAt(at, ".image.data", "empty image data")
		}
	case *compactorv1.ImagePart_Url:
		if s.Url == "" {
			v.addAt(at, ".image.url", "empty image url")
		}
	}
}

func (v *validator) file(at loc, f *compactorv1.FilePart) {
	switch s := f.GetSource().(type) {
	case nil:
		v.addAt(at, ".file", "a file needs data or url")
	case *compactorv1.FilePart_Data:
		if len(s.Data) == 0 {
			v.addAt(at, ".file.data", "empty file data")
		}
	case *compactorv1.FilePart_Url:
		if s.Url == "" {
			v.addAt(at, ".file.url", "empty file url")
		}
	}
	if f.GetMediaType() == "" {
		v.addAt(at, ".file.media_type", "a file needs a media type")
	}
}

func (v *validator) toolCall(at loc, c *compactorv1.ToolCallPart) {
	if c.GetToolName() == "" {
		v.addAt(at, ".tool_call.tool_name", "a tool call needs a tool name")
	}
	id := c.GetToolCallId()
	if id == "" {
		v.addAt(at, ".tool_call.tool_call_id", "a tool call needs an id")
		return
	}
	if st, ok := v.calls[id]; ok && !st.answered {
		v.addAt(at, ".tool_call.tool_call_id", fmt.Sprintf("duplicate tool call id %q: the call in messages[%d] is not answered yet", id, st.msg))
		return
	}
	if v.calls == nil {
		v.calls = make(map[string]callState)
	}
	v.calls[id] = callState{msg: at.msg, executed: c.GetProviderExecuted()}
}

func (v *validator) toolResult(at loc, role compactorv1.Role, r *compactorv1.ToolResultPart) {
	id := r.GetToolCallId()
	switch st, ok := v.calls[id]; {
	case id == "":
		v.addAt(at, ".tool_result.tool_call_id", "a tool result needs the id of the call it answers")
	case !ok:
		v.addAt(at, ".tool_result.tool_call_id", fmt.Sprintf("no earlier tool call with id %q", id))
	case st.answered:
		v.addAt(at, ".tool_result.tool_call_id", fmt.Sprintf("the tool call %q in messages[%d] is already answered", id, st.msg))
	case role == compactorv1.Role_ROLE_ASSISTANT && !(st.executed && st.msg == at.msg):
		v.addAt(at, ".tool_result", "an assistant message holds only results of its own provider-executed tool calls")
	default:
		st.answered = true
		v.calls[id] = st
	}
	o := r.GetOutput()
	if o == nil || o.GetValue() == nil {
		v.addAt(at, ".tool_result.output", "a tool result needs an output")
		return
	}
	if c, ok := o.GetValue().(*compactorv1.ToolOutput_Content); ok {
		for k, p := range c.Content.GetParts() {
			sub := loc{msg: at.msg, part: at.part, sub: k}
			switch pc := p.GetContent().(type) {
			case *compactorv1.Part_Text:
			case *compactorv1.Part_Image:
				v.image(sub, pc.Image)
			case *compactorv1.Part_File:
				v.file(sub, pc.File)
			case *compactorv1.Part_Provider:
				v.providerPart(sub, pc.Provider)
			case nil:
				v.addAt(sub, "", "empty part: exactly one content field must be set")
			default:
				v.addAt(sub, "", fmt.Sprintf("tool output content holds only text, image, file and provider parts, not %s", partName(p)))
			}
		}
	}
}

func (v *validator) approvalRequest(at loc, a *compactorv1.ToolApprovalRequest) {
	id := a.GetApprovalId()
	if id == "" {
		v.addAt(at, ".approval_request.approval_id", "an approval request needs an id")
	} else if _, dup := v.approvals[id]; dup {
		v.addAt(at, ".approval_request.approval_id", fmt.Sprintf("duplicate approval id %q", id))
	} else {
		if v.approvals == nil {
			v.approvals = make(map[string]bool)
		}
		v.approvals[id] = false
	}
	if _, ok := v.calls[a.GetToolCallId()]; !ok {
		v.addAt(at, ".approval_request.tool_call_id", fmt.Sprintf("no tool call with id %q in this or an earlier message", a.GetToolCallId()))
	}
}

func (v *validator) approvalResponse(at loc, a *compactorv1.ToolApprovalResponse) {
	id := a.GetApprovalId()
	answered, ok := v.approvals[id]
	switch {
	case id == "":
		v.addAt(at, ".approval_response.approval_id", "an approval response needs the id of the request it answers")
	case !ok:
		v.addAt(at, ".approval_response.approval_id", fmt.Sprintf("no earlier approval request with id %q", id))
	case answered:
		v.addAt(at, ".approval_response.approval_id", fmt.Sprintf("approval %q is already answered", id))
	default:
		v.approvals[id] = true
	}
}

// roleName is the lower-case name of a role, "unknown" for values outside the enum.
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
	return "unknown"
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
	case *compactorv1.Part_Provider:
		return "provider"
	}
	return "empty"
}
