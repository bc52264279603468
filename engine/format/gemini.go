package format

import (
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// geminiFields are the conversation fields of a Gemini generateContent body (the REST API
// takes both the camelCase and the snake_case spelling).
var geminiFields = []string{"contents", "systemInstruction", "system_instruction"}

// gpart is one Gemini part to write, with the request part it comes from.
type gpart struct {
	p   *compactorv1.Part
	at  loc
	msg *compactorv1.Message
}

type gcontent struct {
	role   string
	lo, hi int // the content's parts are all[lo:hi]
}

func (l *lowerer) gemini() {
	w := &l.w
	// Tool names by call id, over the whole request (a session delta may answer calls it
	// does not resend).
	names := map[string]string{}
	for _, m := range l.req.GetMessages() {
		for _, p := range m.GetParts() {
			if c := p.GetToolCall(); c != nil {
				names[c.GetToolCallId()] = c.GetToolName()
			}
		}
	}
	var sys []string
	var contents []gcontent
	n := 0
	for _, s := range l.msgs {
		n += len(s.m.GetParts())
	}
	all := make([]gpart, 0, n)
	for _, s := range l.msgs {
		m := s.m
		if m.GetRole() == compactorv1.Role_ROLE_SYSTEM {
			for j, p := range m.GetParts() {
				if t, _ := textOf(p); t != "" {
					sys = append(sys, t)
				} else {
					l.dropPart(p, "%s: empty text dropped", where(s.i, j))
				}
			}
			continue
		}
		role := "user"
		if m.GetRole() == compactorv1.Role_ROLE_ASSISTANT {
			role = "model"
		}
		lo := len(all)
		for j, p := range m.GetParts() {
			at := where(s.i, j)
			signed := optionString(p.GetProviderOptions(), "google", optThoughtSig, "thought_signature") != ""
			switch c := p.GetContent().(type) {
			case *compactorv1.Part_Text:
				if c.Text.GetText() == "" && !signed { // a signed empty part carries its signature
					l.dropPart(p, "%s: empty text dropped", at)
					continue
				}
			case *compactorv1.Part_Reasoning:
				if c.Reasoning.GetText() == "" && !signed {
					l.dropPart(p, "%s: reasoning without text or Gemini thought signature dropped", at)
					continue
				}
				if c.Reasoning.GetSignature() != "" {
					l.drop(at, "reasoning.signature")
				}
				if c.Reasoning.GetRedactedData() != "" {
					l.drop(at, "reasoning.redacted_data")
				}
			case *compactorv1.Part_Provider:
				l.dropProviderPart(at, p)
				continue
			case *compactorv1.Part_ToolCall:
				if c.ToolCall.GetProviderExecuted() {
					l.dropPart(p, "%s: provider-executed tool call has no Gemini form; dropped", at)
					continue
				}
			case *compactorv1.Part_ToolResult:
				if m.GetRole() == compactorv1.Role_ROLE_ASSISTANT {
					l.dropPart(p, "%s: provider-executed tool result has no Gemini form; dropped", at)
					continue
				}
			case *compactorv1.Part_Image, *compactorv1.Part_File:
			default:
				l.dropNoForm(p, at, "Gemini")
				continue
			}
			all = append(all, gpart{p: p, at: at, msg: m})
		}
		if len(all) == lo {
			l.warn("messages[%d]: nothing left to send; message dropped", s.i)
			continue
		}
		if k := len(contents); k > 0 && contents[k-1].role == role {
			contents[k-1].hi = len(all)
		} else {
			contents = append(contents, gcontent{role: role, lo: lo, hi: len(all)})
		}
	}
	if len(sys) > 0 {
		w.key("systemInstruction")
		w.obj()
		w.key("parts")
		w.arr()
		for _, t := range sys {
			w.obj()
			w.kstr("text", t)
			w.endObj()
		}
		w.endArr()
		w.endObj()
	}
	w.key("contents")
	w.arr()
	for _, c := range contents {
		w.obj()
		w.kstr("role", c.role)
		w.key("parts")
		w.arr()
		for _, gp := range all[c.lo:c.hi] {
			l.geminiPart(gp, names)
		}
		w.endArr()
		w.endObj()
	}
	w.endArr()
}

func (l *lowerer) geminiPart(gp gpart, names map[string]string) {
	w := &l.w
	p := gp.p
	var media []*compactorv1.Part // tool-output media, sent as parts after the response
	w.obj()
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		w.kstr("text", c.Text.GetText())
	case *compactorv1.Part_Reasoning:
		w.kstr("text", c.Reasoning.GetText())
		w.key("thought")
		w.boolean(true)
	case *compactorv1.Part_Image:
		l.geminiMedia(c.Image.GetData(), c.Image.GetUrl(), func() string {
			if c.Image.GetUrl() != "" {
				return c.Image.GetMediaType()
			}
			return l.imageMedia(c.Image, gp.at)
		})
	case *compactorv1.Part_File:
		l.geminiMedia(c.File.GetData(), c.File.GetUrl(), c.File.GetMediaType)
	case *compactorv1.Part_ToolCall:
		w.key("functionCall")
		w.obj()
		if !l.opt(p.GetProviderOptions(), "google", optIDAssigned).GetBoolValue() {
			w.kstr("id", c.ToolCall.GetToolCallId())
		}
		w.kstr("name", c.ToolCall.GetToolName())
		w.key("args")
		l.inputObject(c.ToolCall.GetInputJson(), gp.at)
		w.endObj()
	case *compactorv1.Part_ToolResult:
		r := c.ToolResult
		name := r.GetToolName()
		if name == "" {
			name = names[r.GetToolCallId()]
		}
		w.key("functionResponse")
		w.obj()
		if !l.opt(p.GetProviderOptions(), "google", optIDAssigned).GetBoolValue() {
			w.kstr("id", r.GetToolCallId())
		}
		w.kstr("name", name)
		w.key("response")
		w.obj()
		w.kstr("name", name)
		w.key("content")
		o := r.GetOutput()
		switch v := o.GetValue().(type) {
		case *compactorv1.ToolOutput_Json:
			l.jsonOrString(v.Json)
		case *compactorv1.ToolOutput_ErrorJson:
			l.jsonOrString(v.ErrorJson)
		case *compactorv1.ToolOutput_Content:
			w.str(outputText(o))
			for k, cp := range v.Content.GetParts() {
				switch {
				case cp.GetProvider() != nil:
					l.dropProviderPart(gp.at.part(k), cp)
				case cp.GetText() == nil:
					media = append(media, cp)
				}
			}
		default:
			w.str(outputText(o))
		}
		w.endObj()
		w.endObj()
	}
	if sig := l.optString(p.GetProviderOptions(), "google", optThoughtSig, "thought_signature"); sig != "" {
		w.kstr("thoughtSignature", sig)
	}
	l.writeCarried(p.GetProviderOptions(), "google", geminiPartCarried)
	w.endObj()
	if len(media) > 0 {
		l.warn("%s: images and files in tool output sent as parts after the function response", gp.at)
		for _, mp := range media {
			l.geminiPart(gpart{p: mp, at: gp.at, msg: gp.msg}, names)
		}
	}
}

// jsonOrString writes valid JSON text as a value and anything else as a string.
func (l *lowerer) jsonOrString(s string) {
	if t, ok := trimJSON(s); ok {
		l.w.raw(t)
	} else {
		l.w.str(s)
	}
}

func (l *lowerer) geminiMedia(data []byte, url string, media func() string) {
	w := &l.w
	if url != "" {
		if mt, d, ok := parseDataURL(url); ok {
			data, url = d, ""
			media = func() string { return mt }
		}
	}
	if url != "" {
		w.key("fileData")
		w.obj()
		if mt := media(); mt != "" {
			w.kstr("mimeType", mt)
		}
		w.kstr("fileUri", url)
		w.endObj()
		return
	}
	w.key("inlineData")
	w.obj()
	w.kstr("mimeType", media())
	w.key("data")
	w.b64(data)
	w.endObj()
}

// --- Lift ---

// gfield returns the member under its camelCase or snake_case name.
func gfield(obj, camel, snake string) string {
	if v := field(obj, camel); v != "" {
		return v
	}
	return field(obj, snake)
}

func (lt *lifter) gemini(body string) error {
	if si := gfield(body, "systemInstruction", "system_instruction"); si != "" && si != "null" {
		sp := lt.root.k("systemInstruction")
		lt.from(sp)
		switch kindOf(si) {
		case kindString:
			lt.add(compactorv1.Role_ROLE_SYSTEM, []*compactorv1.Part{textPart(unquote(si))})
		case kindObject:
			pp := sp.k("parts")
			parts := field(si, "parts")
			if err := want(parts, kindArray, pp); err != nil {
				return err
			}
			for i, e := range elems(parts) {
				ep := pp.i(i)
				if err := want(e, kindObject, ep); err != nil {
					return err
				}
				t, err := str(field(e, "text"), ep.k("text"), true)
				if err != nil {
					return err
				}
				lt.add(compactorv1.Role_ROLE_SYSTEM, []*compactorv1.Part{textPart(t)})
			}
		default:
			return sp.invalid("must be an object with parts, not " + kindName(kindOf(si)))
		}
	}
	cp := lt.root.k("contents")
	contents := field(body, "contents")
	if err := want(contents, kindArray, cp); err != nil {
		return err
	}
	g := &geminiLift{lt: lt}
	for i, c := range elems(contents) {
		lt.from(cp.i(i))
		if err := g.content(c, cp.i(i)); err != nil {
			return err
		}
	}
	return nil
}

// geminiLift tracks calls that came without an id, so results can be paired by name.
type geminiLift struct {
	lt      *lifter
	n       int
	pending []struct{ id, name string }
}

func (g *geminiLift) content(c string, p *jpath) error {
	lt := g.lt
	if err := want(c, kindObject, p); err != nil {
		return err
	}
	role, err := str(field(c, "role"), p.k("role"), false)
	if err != nil {
		return err
	}
	var model bool
	switch role {
	case "", "user", "function", "tool":
	case "model":
		model = true
	default:
		return p.k("role").invalid(`must be "user" or "model", not "` + role + `"`)
	}
	pp := p.k("parts")
	parts := field(c, "parts")
	if err := want(parts, kindArray, pp); err != nil {
		return err
	}
	split := lt.splitter(model)
	for i, e := range elems(parts) {
		part, err := g.part(e, pp.i(i), model)
		if err != nil {
			return err
		}
		split.push(part)
	}
	if len(split.parts) == 0 {
		lt.warn(pp, "empty parts; content skipped")
	}
	split.flush()
	return nil
}

func (g *geminiLift) part(e string, p *jpath, model bool) (*compactorv1.Part, error) {
	if err := want(e, kindObject, p); err != nil {
		return nil, err
	}
	var part *compactorv1.Part
	var err error
	switch {
	case field(e, "text") != "" || field(e, "thought") == "true":
		var t string
		if t, err = str(field(e, "text"), p.k("text"), false); err != nil {
			return nil, err
		}
		if field(e, "thought") == "true" {
			part = &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: t}}}
		} else {
			part = textPart(t)
		}
	case gfield(e, "inlineData", "inline_data") != "":
		ip := p.k("inlineData")
		v := gfield(e, "inlineData", "inline_data")
		if err := want(v, kindObject, ip); err != nil {
			return nil, err
		}
		mt, err := str(gfield(v, "mimeType", "mime_type"), ip.k("mimeType"), true)
		if err != nil {
			return nil, err
		}
		data, err := b64(field(v, "data"), ip.k("data"))
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(mt, "image/") {
			part = imageData(data, mt)
		} else {
			part = fileData(data, mt, sval(gfield(v, "displayName", "display_name")))
		}
	case gfield(e, "fileData", "file_data") != "":
		fp := p.k("fileData")
		v := gfield(e, "fileData", "file_data")
		if err := want(v, kindObject, fp); err != nil {
			return nil, err
		}
		mt, err := str(gfield(v, "mimeType", "mime_type"), fp.k("mimeType"), false)
		if err != nil {
			return nil, err
		}
		u, err := str(gfield(v, "fileUri", "file_uri"), fp.k("fileUri"), true)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(mt, "image/") {
			part = imageURL(u, mt)
		} else {
			if mt == "" {
				mt = mediaFromName(u)
			}
			part = fileURL(u, mt, sval(gfield(v, "displayName", "display_name")))
		}
	case gfield(e, "functionCall", "function_call") != "":
		if !model {
			return nil, p.k("functionCall").invalid("a function call belongs in model content")
		}
		fp := p.k("functionCall")
		v := gfield(e, "functionCall", "function_call")
		if err := want(v, kindObject, fp); err != nil {
			return nil, err
		}
		name, err := str(field(v, "name"), fp.k("name"), true)
		if err != nil {
			return nil, err
		}
		id, err := str(field(v, "id"), fp.k("id"), false)
		if err != nil {
			return nil, err
		}
		assigned := id == ""
		if assigned {
			g.n++
			id = "call_" + name + "_" + itoa(g.n)
			g.pending = append(g.pending, struct{ id, name string }{id, name})
		}
		args := field(v, "args")
		if args == "" || args == "null" {
			args = "{}"
		}
		g.lt.call(id, name)
		part = callPart(id, name, args)
		if assigned {
			setOpt(&part.ProviderOptions, "google", optIDAssigned, structpb.NewBoolValue(true))
		}
	case gfield(e, "functionResponse", "function_response") != "":
		if model {
			return nil, p.k("functionResponse").invalid("a function response belongs in user content")
		}
		fp := p.k("functionResponse")
		v := gfield(e, "functionResponse", "function_response")
		if err := want(v, kindObject, fp); err != nil {
			return nil, err
		}
		name, err := str(field(v, "name"), fp.k("name"), false)
		if err != nil {
			return nil, err
		}
		id, err := str(field(v, "id"), fp.k("id"), false)
		if err != nil {
			return nil, err
		}
		if id == "" {
			for k, c := range g.pending {
				if c.name == name {
					id = c.id
					g.pending = append(g.pending[:k:k], g.pending[k+1:]...)
					break
				}
			}
			if id == "" {
				return nil, fp.k("id").invalid("function response without an id answers no earlier call named " + `"` + name + `"`)
			}
		}
		if name == "" {
			name = g.lt.names[id]
		}
		part = resultPart(id, name, geminiOutput(field(v, "response")))
		if field(v, "id") == "" {
			setOpt(&part.ProviderOptions, "google", optIDAssigned, structpb.NewBoolValue(true))
		}
	default:
		return nil, p.invalid("unsupported part: expected text, inlineData, fileData, functionCall or functionResponse")
	}
	if sig := gfield(e, "thoughtSignature", "thought_signature"); sig != "" {
		s, err := str(sig, p.k("thoughtSignature"), false)
		if err != nil {
			return nil, err
		}
		setOpt(&part.ProviderOptions, "google", optThoughtSig, structpb.NewStringValue(s))
	}
	carry(&part.ProviderOptions, e, "google", geminiPartCarried)
	return part, nil
}

// geminiOutput reads a functionResponse.response: {"name","content"} (as Lower writes it)
// unwraps to its content; any other value is kept as JSON.
func geminiOutput(resp string) *compactorv1.ToolOutput {
	if kindOf(resp) == kindObject {
		content, other := "", false
		for k, v := range members(resp) {
			switch k {
			case "name":
			case "content":
				content = v
			default:
				other = true
			}
		}
		if content != "" && !other {
			if kindOf(content) == kindString {
				return textOut(unquote(content))
			}
			return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Json{Json: content}}
		}
	}
	if resp == "" || resp == "null" {
		return textOut("")
	}
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Json{Json: resp}}
}
