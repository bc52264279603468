// Package format converts between the IR and the request bodies of provider APIs: Lower
// renders a conversation as the exact JSON body a provider takes (Anthropic Messages, OpenAI
// Chat Completions, OpenAI Responses, Gemini generateContent, Bedrock Converse) and Lift reads
// such a body back into the IR, detecting its format when asked to. A request's tool
// definitions and tool choice travel beside the conversation in a provider-neutral form
// (compactorv1.Tool, ToolChoice), and its other fields in rest_body.
//
// Both directions are deterministic and never panic. Bad input is reported as an
// *engine.ValidationError whose field names the JSON path ("body.messages[3].content[1].type",
// "base_body"). Everything that cannot be carried exactly is reported as a warning. The rules
// per provider are in docs/PROVIDERS.md.
package format

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/uninit"
)

// Lower renders req.Messages as the provider request body. req has already passed
// engine.Limits.Validate.
//
// The body holds the conversation fields of req.Provider's API (for example "system" and
// "messages" for Anthropic), merged into req.BaseBody when it is set: base_body must be a JSON
// object; its conversation fields are replaced, every other member passes through unchanged
// and in order. Then come the members of req.RestBody that base_body lacks (all of them in
// the target's format; of another format, those with an equivalent in the target's names,
// every other one named in a warning), the tools and the tool choice in the target's form
// (merged, by name, into those base_body holds), and the conversation fields
// (request.go; LowerRequest's comments state the rules). The same request always gives the
// same bytes.
//
// Unless req.KeepHistory is set, only what a model sees is sent (engine.Sent: head messages,
// the latest summary and what follows it; never compaction prompts). With req.Session active
// and a cursor inside the conversation, only DYNAMIC system messages (as user messages
// prefixed "[System Context]: ") and the messages after the cursor are sent, and the returned
// cursor is the index of the last message included; a negative cursor or one at or past the
// end sends the full context. Without a session the returned cursor is the index of the last
// message.
//
// Errors: an *engine.ValidationError for an unknown provider, a base_body or rest_body that
// is not a JSON object, a rest_body without its rest_provider, or a malformed tool (no name,
// a schema that is not a JSON object) or tool choice. Everything that could not be carried is
// listed in the response's warnings; with req.Strict, a *StrictError names it instead.
func Lower(req *compactorv1.LowerRequest) (*compactorv1.LowerResponse, error) {
	l := &lowerer{req: req}
	base, err := parseBase(req.GetBaseBody())
	if err != nil {
		return nil, err
	}
	if l.base, err = l.compose(base); err != nil {
		return nil, err
	}
	var conv []string
	var write func()
	switch req.GetProvider() {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		conv, write = anthropicFields, l.anthropic
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		conv, write = chatFields, l.chat
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		conv, write = responsesFields, l.responses
		l.skip = []string{"include"}
	case compactorv1.Provider_PROVIDER_GEMINI:
		conv, write = geminiFields, l.gemini
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		conv, write = bedrockFields, l.bedrock
	default:
		return nil, engine.Invalid("provider", fmt.Sprintf("unknown provider %d", int32(req.GetProvider())))
	}
	l.msgs, l.cursor = selectMessages(req)
	// Unzeroed: the writer only appends, and the body is tens of KiB.
	l.w.b = uninit.Bytes(estimateSize(l.msgs) + membersSize(l.base) + 64)
	l.w.b = append(l.w.b, '{')
	l.w.first = true
	for _, m := range l.base {
		if !isOneOf(m.key, conv) && !l.skipBase(m.key) {
			l.w.kraw(m.key, m.val)
		}
	}
	write()
	l.w.endObj()
	l.unusedOptions()
	l.checkRequired()
	l.finishWarnings()
	if req.GetStrict() && len(l.warnings) > 0 {
		return nil, &StrictError{Target: req.GetProvider(), Warnings: l.warnings}
	}
	return &compactorv1.LowerResponse{
		// The buffer is never touched again, so it can back the string without a copy.
		Body:     unsafe.String(unsafe.SliceData(l.w.b), len(l.w.b)),
		Warnings: l.warnings,
		Cursor:   l.cursor,
	}, nil
}

// lowerer holds the state of one Lower call.
type lowerer struct {
	req *compactorv1.LowerRequest
	// base: the members written before the conversation (compose).
	base     []member
	msgs     []src
	cursor   int32
	w        jw
	warnings []string
	// notes: per warning, its aggregation key and count; seen: the index of each key, once
	// there are many.
	notes []note
	seen  map[string]int
	// used: the provider options a writer carried; skipped: parts dropped whole (warned);
	// uncached: tool-result content parts whose cache breakpoint was dropped (warned).
	used     map[*structpb.Value]bool
	skipped  map[*compactorv1.Part]bool
	uncached map[*compactorv1.Part]bool
	// skip lists base members a format writes itself (Responses "include").
	skip []string
	// toolCaches counts the cache breakpoints written on tools (Anthropic's limit counts
	// them first).
	toolCaches int
}

// member is one member of a JSON object: decoded key and raw value.
type member struct{ key, val string }

// src is a message selected for sending with its index in the request.
type src struct {
	i int
	m *compactorv1.Message
}

func (l *lowerer) skipBase(k string) bool { return isOneOf(k, l.skip) }

func isOneOf(s string, list []string) bool {
	for _, x := range list {
		if s == x {
			return true
		}
	}
	return false
}

// baseField returns the raw value of a base_body member, or "".
func (l *lowerer) baseField(k string) string {
	for _, m := range l.base {
		if m.key == k {
			return m.val
		}
	}
	return ""
}

// warn records a warning. Warnings that differ only in their first argument (the location)
// are reported once, at the first location, with their count: the text is formatted for
// the first only.
func (l *lowerer) warn(format string, args ...any) {
	key := format
	var at any
	if len(args) > 0 {
		at = args[0]
	}
	if len(args) > 1 {
		key += fmt.Sprint(args[1:]...)
	}
	if !l.repeated(key) {
		l.note(fmt.Sprintf(format, args...), key, at)
	}
}

// parseBase checks base_body and returns its members in order.
func parseBase(body string) ([]member, error) {
	if strings.TrimSpace(body) == "" {
		return nil, nil
	}
	root := &jpath{key: "base_body"}
	if err := validateJSON(body, root); err != nil {
		return nil, err
	}
	body = strings.TrimSpace(body)
	if kindOf(body) != kindObject {
		return nil, root.invalid("must be a JSON object, not " + kindName(kindOf(body)))
	}
	var out []member
	for k, v := range members(body) {
		out = append(out, member{k, v})
	}
	return out, nil
}

// membersSize is the size of the members' keys and values.
func membersSize(ms []member) int {
	n := 0
	for _, m := range ms {
		n += len(m.key) + len(m.val) + 4
	}
	return n
}

// estimateSize guesses the body size from the payload sizes, to allocate once.
func estimateSize(msgs []src) int {
	n := 0
	for _, s := range msgs {
		n += 32
		for _, p := range s.m.GetParts() {
			n += partSize(p) + 48
		}
	}
	return n + n/16
}

func partSize(p *compactorv1.Part) int {
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		return len(c.Text.GetText())
	case *compactorv1.Part_Image:
		return len(c.Image.GetData())*4/3 + len(c.Image.GetUrl())
	case *compactorv1.Part_File:
		return len(c.File.GetData())*4/3 + len(c.File.GetUrl())
	case *compactorv1.Part_Reasoning:
		r := c.Reasoning
		return len(r.GetText()) + len(r.GetSignature()) + len(r.GetRedactedData())
	case *compactorv1.Part_ToolCall:
		return len(c.ToolCall.GetInputJson())*11/10 + len(c.ToolCall.GetToolName()) + len(c.ToolCall.GetToolCallId())
	case *compactorv1.Part_ToolResult:
		o := c.ToolResult.GetOutput()
		n := len(o.GetText()) + len(o.GetJson()) + len(o.GetErrorText()) + len(o.GetErrorJson()) + len(o.GetDenied())
		for _, cp := range o.GetContent().GetParts() {
			n += partSize(cp) + 32
		}
		return n*11/10 + len(c.ToolResult.GetToolCallId())
	}
	return 0
}

// loc names a part in warnings: messages[i].parts[j], or with k >= 0 a part of that tool
// result's content. It is rendered only when a warning is written.
type loc struct{ i, j, k int }

// where names part j of message i.
func where(i, j int) loc { return loc{i, j, -1} }

// part names part k of the tool output content at l.
func (l loc) part(k int) loc { return loc{l.i, l.j, k} }

// String renders the location as a request field path.
func (l loc) String() string {
	s := "messages[" + strconv.Itoa(l.i) + "].parts[" + strconv.Itoa(l.j) + "]"
	if l.k >= 0 {
		s += ".tool_result.output.content.parts[" + strconv.Itoa(l.k) + "]"
	}
	return s
}

// option returns provider_options[provider][name] (trying each name), or nil.
func option(opts map[string]*structpb.Struct, provider string, names ...string) *structpb.Value {
	s := opts[provider]
	if s == nil {
		return nil
	}
	for _, n := range names {
		if v, ok := s.GetFields()[n]; ok {
			return v
		}
	}
	return nil
}

// optionString returns a string option, or "".
func optionString(opts map[string]*structpb.Struct, provider string, names ...string) string {
	return option(opts, provider, names...).GetStringValue()
}

// textOf returns the text of a text part and whether p is one.
func textOf(p *compactorv1.Part) (string, bool) {
	t, ok := p.GetContent().(*compactorv1.Part_Text)
	if !ok {
		return "", false
	}
	return t.Text.GetText(), true
}

// isBlank reports whether s is empty or only whitespace; it stops at the first other rune.
func isBlank(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f' {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			return false
		}
		i += n
	}
	return true
}

// trimJSON returns s without surrounding whitespace and whether it is valid JSON.
func trimJSON(s string) (string, bool) {
	t := strings.TrimSpace(s)
	if t == "" {
		return t, false
	}
	return t, validateJSON(t, nil) == nil
}

// inputObject writes a tool call's input where the API wants a JSON object: valid JSON objects
// go as they are, an empty input as {}, anything else wrapped as {"_raw": "..."} (warned).
func (l *lowerer) inputObject(input string, at loc) {
	t, ok := trimJSON(input)
	switch {
	case t == "":
		l.w.raw("{}")
	case ok && kindOf(t) == kindObject:
		l.w.raw(t)
	default:
		l.warn("%s: tool call input is not a JSON object; sent wrapped as {\"_raw\": ...}", at)
		l.w.obj()
		l.w.kstr("_raw", input)
		l.w.endObj()
	}
}

// sniffImage returns the media type the bytes start with, or "".
func sniffImage(b []byte) string {
	s := unsafe.String(unsafe.SliceData(b), len(b))
	switch {
	case strings.HasPrefix(s, "\x89PNG\r\n\x1a\n"):
		return "image/png"
	case strings.HasPrefix(s, "\xff\xd8\xff"):
		return "image/jpeg"
	case strings.HasPrefix(s, "GIF87a"), strings.HasPrefix(s, "GIF89a"):
		return "image/gif"
	case len(s) >= 12 && s[:4] == "RIFF" && s[8:12] == "WEBP":
		return "image/webp"
	}
	return ""
}

// imageMedia returns the media type to declare for inline image bytes, correcting (and
// warning about) a declared type that the bytes contradict.
func (l *lowerer) imageMedia(img *compactorv1.ImagePart, at loc) string {
	declared := img.GetMediaType()
	sniffed := sniffImage(img.GetData())
	switch {
	case sniffed == "":
		if declared == "" {
			l.warn("%s: image media type unknown; sent as image/png", at)
			return "image/png"
		}
		return declared
	case declared == "":
		return sniffed
	case !strings.EqualFold(declared, sniffed) && !(sniffed == "image/jpeg" && strings.EqualFold(declared, "image/jpg")):
		l.warn("%s: image declared %s but its bytes are %s; sent as %s", at, declared, sniffed, sniffed)
		return sniffed
	}
	return declared
}

// inlineImage resolves an image to inline bytes and the media type to declare (a data: URL
// decoded; a declared type its bytes contradict corrected, with a warning), or, given by any
// other URL, to that URL and its declared media type.
func (l *lowerer) inlineImage(img *compactorv1.ImagePart, at loc) (data []byte, url, media string) {
	u := img.GetUrl()
	if u == "" {
		return img.GetData(), "", l.imageMedia(img, at)
	}
	m, d, ok := parseDataURL(u)
	if !ok {
		return nil, u, img.GetMediaType()
	}
	return d, "", l.imageMedia(&compactorv1.ImagePart{Source: &compactorv1.ImagePart_Data{Data: d}, MediaType: m}, at)
}

// imageURLValue writes an image as a URL string value: its URL, or its bytes as a data: URL
// (the OpenAI formats).
func (l *lowerer) imageURLValue(img *compactorv1.ImagePart, at loc) {
	if u := img.GetUrl(); u != "" {
		l.w.str(u)
	} else {
		l.w.dataURL(l.imageMedia(img, at), img.GetData())
	}
}

// typedText writes {"type": typ, "text": text}.
func (w *jw) typedText(typ, text string) {
	w.obj()
	w.kstr("type", typ)
	w.kstr("text", text)
	w.endObj()
}

// dataURL writes inline data as a data: URL string value.
func (w *jw) dataURL(media string, data []byte) {
	w.comma()
	w.b = append(w.b, `"data:`...)
	w.b = appendEscaped(w.b, media)
	w.b = append(w.b, ";base64,"...)
	w.b = base64.StdEncoding.AppendEncode(w.b, data)
	w.b = append(w.b, '"')
}

// parseDataURL splits "data:<media>;base64,<data>" into media type and decoded bytes.
func parseDataURL(u string) (media string, data []byte, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", nil, false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", nil, false
	}
	media, isB64 := strings.CutSuffix(meta, ";base64")
	if !isB64 {
		return "", nil, false
	}
	if i := strings.IndexByte(media, ';'); i >= 0 {
		media = media[:i]
	}
	data, err := decodeB64(payload)
	if err != nil {
		return "", nil, false
	}
	return media, data, true
}

// trimRightSpace trims trailing Unicode whitespace.
func trimRightSpace(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }

func itoa(i int) string { return strconv.Itoa(i) }
