package format

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// Lift reads a provider request body into the IR.
//
// With req.Provider unspecified the format is detected, in this order: a top-level "input"
// means OpenAI Responses; Converse-shaped content (inferenceConfig, toolConfig, blocks keyed by
// their kind without a "type") means Bedrock; a top-level "system", Anthropic-only blocks
// (tool_use, tool_result, thinking, compaction, image/document with a source) or tools (one
// with an input_schema, a server tool) mean Anthropic; "messages" means OpenAI Chat;
// "contents" means Gemini.
//
// The body's tool definitions and tool choice are in LiftResponse.tools and tool_choice, in
// the provider-neutral form (and, as the body wrote them, in rest_body).
//
// Message boundaries follow the IR's roles: each system block becomes one system message, and
// a provider message that mixes tool results and other content becomes a tool message (the
// results, in order) and a user message (the rest), in the order they appeared. Tool results
// get the name of the nearest earlier call with their id when the body does not name it.
// Gemini function calls without an id get "call_<name>_<n>" (n counting from 1 in the body),
// and a function response without an id answers the earliest unanswered call with its name.
// LiftResponse.RestBody is the body without its conversation fields ("{}" when nothing else
// was present), so Lower with base_body = RestBody reproduces the request; for any body Lower
// wrote, byte for byte.
//
// Lift does not run engine.Limits.Validate: a body whose tool results answer no call lifts to
// an IR that it rejects.
//
// Errors: an *engine.ValidationError naming the JSON path ("body.messages[3].content[1].type")
// for malformed JSON, JSON nested deeper than 512 levels, or a shape the format does not have.
// Lift never panics.
func Lift(req *compactorv1.LiftRequest) (*compactorv1.LiftResponse, error) {
	resp, _, err := lift(req, false)
	return resp, err
}

// LiftSources is Lift, also saying where in the body each lifted part was read:
// sources[i][j] is the JSON path of the body element ("body.messages[2]", "body.input[5]",
// "body.system") that part j of message i came from. A rule the lifted IR breaks
// (engine.Limits.Validate's) can so be reported where the caller wrote it, not at the IR's index.
// It costs a slice per message; Lift does not pay it.
func LiftSources(req *compactorv1.LiftRequest) (*compactorv1.LiftResponse, [][]string, error) {
	return lift(req, true)
}

func lift(req *compactorv1.LiftRequest, track bool) (*compactorv1.LiftResponse, [][]string, error) {
	body := strings.TrimSpace(req.GetBody())
	root := &jpath{key: "body"}
	if body == "" {
		return nil, nil, root.invalid("empty request body")
	}
	if err := validateJSON(body, root); err != nil {
		return nil, nil, err
	}
	if kindOf(body) != kindObject {
		return nil, nil, root.invalid("must be a JSON object, not " + kindName(kindOf(body)))
	}
	provider := req.GetProvider()
	if provider == compactorv1.Provider_PROVIDER_UNSPECIFIED {
		provider = detect(body)
		if provider == compactorv1.Provider_PROVIDER_UNSPECIFIED {
			return nil, nil, root.invalid(`unknown request format: expected "input" (OpenAI Responses), "messages" (Anthropic, OpenAI Chat, Bedrock) or "contents" (Gemini)`)
		}
	}
	lt := &lifter{root: root, names: map[string]string{}, track: track}
	var conv []string
	var err error
	switch provider {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		conv, err = anthropicFields, lt.anthropic(body)
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		conv, err = chatFields, lt.chat(body)
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		conv, err = responsesFields, lt.responses(body)
	case compactorv1.Provider_PROVIDER_GEMINI:
		conv, err = geminiFields, lt.gemini(body)
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		conv, err = bedrockFields, lt.bedrock(body)
	default:
		return nil, nil, engine.Invalid("provider", fmt.Sprintf("unknown provider %d", int32(provider)))
	}
	if err != nil {
		return nil, nil, err
	}
	lt.from(nil)
	rest, tm := restBody(body, conv, toolKeys(provider))
	resp := &compactorv1.LiftResponse{Messages: lt.msgs, Provider: provider, RestBody: rest}
	if len(tm) > 0 {
		ts := readTools(func(k string) string {
			if i := memberIndex(tm, k); i >= 0 {
				return tm[i].val
			}
			return ""
		}, provider, root)
		for _, o := range ts.odd {
			if o.why == "" {
				lt.warnings = append(lt.warnings, "body."+o.path+": field not carried by the IR's tools; ignored")
			} else {
				lt.warnings = append(lt.warnings, "body."+o.path+": "+o.why+"; the definition is in rest_body only, not in tools")
			}
		}
		resp.Tools, resp.ToolChoice = ts.tools, ts.choice
	}
	resp.Warnings = lt.warnings
	return resp, lt.sources, nil
}

// restBody returns the object body without the members named in conv, other members in order
// and byte-exact, and the members named in keep.
func restBody(body string, conv, keep []string) (string, []member) {
	var w jw
	var kept []member
	w.b = make([]byte, 0, 64)
	w.b = append(w.b, '{')
	w.first = true
	for k, v := range members(body) {
		if !isOneOf(k, conv) {
			w.kraw(k, v)
			if isOneOf(k, keep) {
				kept = append(kept, member{k, v})
			}
		}
	}
	w.endObj()
	return string(w.b), kept
}

// lifter holds the state of one Lift call.
type lifter struct {
	root     *jpath
	msgs     []*compactorv1.Message
	warnings []string
	// names maps a tool call id to the name of the latest call with that id, so results
	// can name their tool.
	names map[string]string
	// With track, sources[i][j] is the body path part j of message i was read from (see
	// from); el is the path of the element being read ("" before the first).
	track   bool
	sources [][]string
	el      string
	// alone is the latest message that must stay alone (a provider compaction): appendTo
	// starts a new message after it.
	alone *compactorv1.Message
}

// from says that the parts added from now on are read from the body element at p: it
// attributes every part added since the previous call to that call's element. Lift calls it
// for every top-level element (a message, an input item, the system field), and with nil
// at the end.
func (lt *lifter) from(p *jpath) {
	if !lt.track {
		return
	}
	// The path is rendered here rather than kept: a kept *jpath would make every path
	// passed here escape to the heap, tracking or not.
	src := cmp.Or(lt.el, lt.root.key)
	for i := max(len(lt.sources)-1, 0); i < len(lt.msgs); i++ {
		if i == len(lt.sources) {
			lt.sources = append(lt.sources, nil)
		}
		for range len(lt.msgs[i].GetParts()) - len(lt.sources[i]) {
			lt.sources[i] = append(lt.sources[i], src)
		}
	}
	lt.el = ""
	if p != nil {
		lt.el = p.String()
	}
}

func (lt *lifter) warn(p *jpath, format string, args ...any) {
	lt.warnings = append(lt.warnings, p.String()+": "+fmt.Sprintf(format, args...))
}

// add appends a message with the given parts, unless parts is empty.
func (lt *lifter) add(role compactorv1.Role, parts []*compactorv1.Part) *compactorv1.Message {
	if len(parts) == 0 {
		return nil
	}
	m := &compactorv1.Message{Role: role, Parts: parts}
	lt.msgs = append(lt.msgs, m)
	return m
}

// toolUse reads the id (under idKey), name and input of an Anthropic tool_use block or a
// Bedrock toolUse object; a missing input is the empty object.
func toolUse(v string, p *jpath, idKey string) (id, name, input string, err error) {
	if id, err = str(field(v, idKey), p.k(idKey), true); err != nil {
		return "", "", "", err
	}
	if name, err = str(field(v, "name"), p.k("name"), true); err != nil {
		return "", "", "", err
	}
	if input = field(v, "input"); input == "" {
		input = "{}"
	}
	return id, name, input, nil
}

// eachMessage lifts every element of the body's "messages" array with lift.
func (lt *lifter) eachMessage(body string, lift func(m string, p *jpath) error) error {
	mp := lt.root.k("messages")
	msgs := field(body, "messages")
	if err := want(msgs, kindArray, mp); err != nil {
		return err
	}
	for i, m := range elems(msgs) {
		p := mp.i(i)
		lt.from(p)
		if err := lift(m, p); err != nil {
			return err
		}
	}
	return nil
}

// turnSplitter turns the parts of one provider message into IR messages: an assistant
// message stays whole; a user message splits into runs of tool results (ROLE_TOOL) and other
// content (ROLE_USER), in order.
type turnSplitter struct {
	lt        *lifter
	assistant bool
	cur       compactorv1.Role
	parts     []*compactorv1.Part // the current run
}

func (lt *lifter) splitter(assistant bool) *turnSplitter {
	s := &turnSplitter{lt: lt, assistant: assistant, cur: compactorv1.Role_ROLE_USER}
	if assistant {
		s.cur = compactorv1.Role_ROLE_ASSISTANT
	}
	return s
}

// push adds the next part, closing the current run when the part changes its role.
func (s *turnSplitter) push(p *compactorv1.Part) {
	if !s.assistant {
		r := compactorv1.Role_ROLE_USER
		if p.GetToolResult() != nil {
			r = compactorv1.Role_ROLE_TOOL
		}
		if r != s.cur && len(s.parts) > 0 {
			s.lt.add(s.cur, s.parts)
			s.parts = nil
		}
		s.cur = r
	}
	s.parts = append(s.parts, p)
}

// flush adds the last run (nothing when the message had no parts).
func (s *turnSplitter) flush() { s.lt.add(s.cur, s.parts) }

// alone adds p as a message of its own (a provider compaction, a summary boundary), closing
// the current run first.
func (s *turnSplitter) alone(p *compactorv1.Part) {
	s.lt.add(s.cur, s.parts)
	s.parts = nil
	r := compactorv1.Role_ROLE_USER
	if s.assistant {
		r = compactorv1.Role_ROLE_ASSISTANT
	}
	s.cur = r
	s.lt.add(r, []*compactorv1.Part{p})
}

// str reads a string value (required when req is true); null counts as absent.
func str(v string, p *jpath, req bool) (string, error) {
	switch kindOf(v) {
	case kindString:
		return unquote(v), nil
	case kindInvalid, kindNull:
		if req {
			return "", p.invalid("required string is missing")
		}
		return "", nil
	}
	return "", p.invalid("must be a string, not " + kindName(kindOf(v)))
}

// alternatingMessage reads a message object of the alternating formats (Anthropic, Bedrock),
// {"role": "user" | "assistant", "content": ...}: whether it is the assistant's, and its
// content member. A role other than those two is an error naming p.role; other members are
// warned about.
func (lt *lifter) alternatingMessage(m string, p *jpath) (assistant bool, content string, err error) {
	if err := want(m, kindObject, p); err != nil {
		return false, "", err
	}
	role, err := str(field(m, "role"), p.k("role"), true)
	if err != nil {
		return false, "", err
	}
	switch role {
	case "user":
	case "assistant":
		assistant = true
	default:
		return false, "", p.k("role").invalid(`must be "user" or "assistant", not "` + role + `"`)
	}
	lt.unknownKeys(m, p, "role", "content")
	return assistant, field(m, "content"), nil
}

// want checks that v has kind k.
func want(v string, k jsonKind, p *jpath) error {
	if kindOf(v) != k {
		if v == "" {
			return p.invalid("required " + strings.TrimPrefix(strings.TrimPrefix(kindName(k), "an "), "a ") + " is missing")
		}
		return p.invalid("must be " + kindName(k) + ", not " + kindName(kindOf(v)))
	}
	return nil
}

// decodeB64 decodes base64 in the standard or URL alphabet, padded or not.
func decodeB64(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	if b, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	if b, err := base64.URLEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawURLEncoding.DecodeString(s)
}

// b64 reads a required base64 string.
func b64(v string, p *jpath) ([]byte, error) {
	s, err := str(v, p, true)
	if err != nil {
		return nil, err
	}
	b, err := decodeB64(s)
	if err != nil {
		return nil, p.invalid("invalid base64 data")
	}
	return b, nil
}

// opts builds provider options {provider: {name: value}} from raw JSON.
func opts(provider, name, raw string) map[string]*structpb.Struct {
	return map[string]*structpb.Struct{provider: {Fields: map[string]*structpb.Value{name: toValue(raw)}}}
}

// setOpt adds provider_options[provider][name] = v to a part's options.
func setOpt(o *map[string]*structpb.Struct, provider, name string, v *structpb.Value) {
	if *o == nil {
		*o = map[string]*structpb.Struct{}
	}
	s := (*o)[provider]
	if s == nil {
		s = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		(*o)[provider] = s
	}
	s.Fields[name] = v
}

// Part constructors.
func textPart(s string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}
}

func callPart(id, name, input string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{
		ToolCallId: id, ToolName: name, InputJson: input}}}
}

func resultPart(id, name string, out *compactorv1.ToolOutput) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
		ToolCallId: id, ToolName: name, Output: out}}}
}

func imageData(data []byte, media string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Image{Image: &compactorv1.ImagePart{
		Source: &compactorv1.ImagePart_Data{Data: data}, MediaType: media}}}
}

func imageURL(url, media string) *compactorv1.Part {
	if m, data, ok := parseDataURL(url); ok {
		return imageData(data, m)
	}
	return &compactorv1.Part{Content: &compactorv1.Part_Image{Image: &compactorv1.ImagePart{
		Source: &compactorv1.ImagePart_Url{Url: url}, MediaType: media}}}
}

func fileData(data []byte, media, name string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{
		Source: &compactorv1.FilePart_Data{Data: data}, MediaType: media, Filename: name}}}
}

func fileURL(url, media, name string) *compactorv1.Part {
	if m, data, ok := parseDataURL(url); ok {
		return fileData(data, m, name)
	}
	return &compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{
		Source: &compactorv1.FilePart_Url{Url: url}, MediaType: media, Filename: name}}}
}

func textOut(s string) *compactorv1.ToolOutput {
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: s}}
}

// call records a tool call's name for later results.
func (lt *lifter) call(id, name string) { lt.names[id] = name }

// unknownKeys warns about members of obj outside known.
func (lt *lifter) unknownKeys(obj string, p *jpath, known ...string) {
	lt.unknownKeysC(obj, p, nil, "", nil, known...)
}

// unknownKeysC warns about members of obj outside known and carried, and in the same walk
// keeps the carried members as carry does: provider_options[provider][name] in *o, the first
// member of each name, left out when null. carried holds at most 64 names.
func (lt *lifter) unknownKeysC(obj string, p *jpath, o *map[string]*structpb.Struct, provider string, carried []string, known ...string) {
	var seen uint64 // the carried names met so far, by index: field finds the first
	for k, v := range members(obj) {
		if i := slices.Index(carried, k); i >= 0 {
			if seen&(1<<i) == 0 && v != "null" {
				setOpt(o, provider, k, toValue(v))
			}
			seen |= 1 << i
			continue
		}
		if !isOneOf(k, known) {
			lt.warn(p.k(k), "field not carried by the IR; ignored")
		}
	}
}
