package format

import (
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// chatFields are the conversation fields of an OpenAI Chat Completions body.
var chatFields = []string{"messages"}

// reasoningModel reports whether an OpenAI model takes "developer" instead of "system"
// messages (o-series and gpt-5, not gpt-5-chat).
func reasoningModel(model string) bool {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	switch {
	case strings.HasPrefix(model, "gpt-5-chat"):
		return false
	case strings.HasPrefix(model, "gpt-5"), strings.HasPrefix(model, "o1"),
		strings.HasPrefix(model, "o3"), strings.HasPrefix(model, "o4"):
		return true
	}
	return false
}

// model is the request's model: the LowerRequest's, else base_body's.
func (l *lowerer) model() string {
	if m := l.req.GetModel(); m != "" {
		return m
	}
	return sval(l.baseField("model"))
}

func (l *lowerer) systemRole() string {
	if reasoningModel(l.model()) {
		return "developer"
	}
	return "system"
}

func (l *lowerer) chat() {
	w := &l.w
	sysRole := l.systemRole()
	var pending []*compactorv1.Part // tool-output media waiting for a user message
	var pendingAt loc
	flush := func() {
		if len(pending) == 0 {
			return
		}
		l.warn("%s: images and files in tool output cannot go in an OpenAI tool message; sent in a following user message", pendingAt)
		w.obj()
		w.kstr("role", "user")
		w.key("content")
		w.arr()
		for _, p := range pending {
			l.chatUserPart(p, pendingAt)
		}
		w.endArr()
		w.endObj()
		pending = nil
	}
	w.key("messages")
	w.arr()
	for _, s := range l.msgs {
		m := s.m
		if m.GetRole() != compactorv1.Role_ROLE_TOOL {
			flush()
		}
		switch m.GetRole() {
		case compactorv1.Role_ROLE_SYSTEM:
			w.obj()
			w.kstr("role", sysRole)
			w.key("content")
			l.chatTexts(m.GetParts(), "text")
			l.writeCarried(m.GetProviderOptions(), "openai", chatMessageCarried)
			w.endObj()
		case compactorv1.Role_ROLE_USER:
			l.chatUser(s.i, m)
		case compactorv1.Role_ROLE_ASSISTANT:
			l.chatAssistant(s.i, m)
		case compactorv1.Role_ROLE_TOOL:
			for j, p := range m.GetParts() {
				at := where(s.i, j)
				r := l.toolResultOrDrop(p, at, "OpenAI Chat")
				if r == nil {
					continue
				}
				w.obj()
				w.kstr("role", "tool")
				w.kstr("tool_call_id", r.GetToolCallId())
				w.key("content")
				if c := r.GetOutput().GetContent(); c != nil {
					var texts []*compactorv1.Part
					for k, cp := range c.GetParts() {
						switch {
						case cp.GetText() != nil:
							texts = append(texts, cp)
						case cp.GetProvider() != nil:
							l.dropProviderPart(at.part(k), cp)
						default:
							pending = append(pending, cp)
							pendingAt = at
						}
					}
					l.chatTextArray(texts, "text")
				} else {
					w.str(outputText(r.GetOutput()))
				}
				w.endObj()
			}
		}
	}
	flush()
	w.endArr()
}

// chatTexts writes text parts as a string when there is one, else as an array of typed text
// parts.
func (l *lowerer) chatTexts(parts []*compactorv1.Part, typ string) {
	if len(parts) == 1 {
		t, _ := textOf(parts[0])
		l.w.str(t)
		return
	}
	l.chatTextArray(parts, typ)
}

func (l *lowerer) chatTextArray(parts []*compactorv1.Part, typ string) {
	w := &l.w
	w.arr()
	for _, p := range parts {
		t, _ := textOf(p)
		w.typedText(typ, t)
	}
	w.endArr()
}

// keptParts returns the parts worth sending: empty texts are dropped with a warning.
func (l *lowerer) keptParts(i int, m *compactorv1.Message) []*compactorv1.Part {
	parts := m.GetParts()
	for j, p := range parts {
		if t, ok := textOf(p); ok && t == "" {
			l.dropPart(p, "%s: empty text dropped", where(i, j))
			kept := make([]*compactorv1.Part, 0, len(parts))
			for k, q := range parts {
				if t, ok := textOf(q); ok && t == "" {
					if k > j {
						l.dropPart(q, "%s: empty text dropped", where(i, k))
					}
					continue
				}
				kept = append(kept, q)
			}
			return kept
		}
	}
	return parts
}

func (l *lowerer) chatUser(i int, m *compactorv1.Message) {
	w := &l.w
	parts := l.keptParts(i, m)
	if len(parts) == 0 {
		l.warn("messages[%d]: nothing left to send; message dropped", i)
		return
	}
	w.obj()
	w.kstr("role", "user")
	w.key("content")
	if t, ok := textOf(parts[0]); ok && len(parts) == 1 {
		w.str(t)
	} else {
		w.arr()
		for j, p := range parts {
			l.chatUserPart(p, where(i, j))
		}
		w.endArr()
	}
	l.writeCarried(m.GetProviderOptions(), "openai", chatMessageCarried)
	w.endObj()
}

// chatUserPart writes one user content part.
func (l *lowerer) chatUserPart(p *compactorv1.Part, at loc) {
	w := &l.w
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		w.typedText("text", c.Text.GetText())
	case *compactorv1.Part_Image:
		w.obj()
		w.kstr("type", "image_url")
		w.key("image_url")
		w.obj()
		w.key("url")
		l.imageURLValue(c.Image, at)
		l.openaiImageDetail(p)
		w.endObj()
		w.endObj()
	case *compactorv1.Part_File:
		f := c.File
		mt := strings.ToLower(f.GetMediaType())
		switch {
		case f.GetUrl() != "" && !strings.HasPrefix(f.GetUrl(), "data:"):
			l.dropPart(p, "%s: OpenAI Chat takes files inline only, not by URL; dropped", at)
		case (mt == "audio/wav" || mt == "audio/x-wav" || mt == "audio/mpeg" || mt == "audio/mp3") && f.GetUrl() == "":
			w.obj()
			w.kstr("type", "input_audio")
			w.key("input_audio")
			w.obj()
			w.key("data")
			w.b64(f.GetData())
			if strings.Contains(mt, "wav") {
				w.kstr("format", "wav")
			} else {
				w.kstr("format", "mp3")
			}
			w.endObj()
			w.endObj()
		default:
			w.obj()
			w.kstr("type", "file")
			w.key("file")
			w.obj()
			if n := f.GetFilename(); n != "" {
				w.kstr("filename", n)
			}
			w.key("file_data")
			if f.GetUrl() != "" {
				w.str(f.GetUrl())
			} else {
				w.dataURL(f.GetMediaType(), f.GetData())
			}
			w.endObj()
			w.endObj()
		}
	default:
		l.dropNoForm(p, at, "OpenAI Chat")
	}
}

// chatAssistant writes an assistant message: text parts concatenated as content, refusal
// texts as refusal, reasoning that came from a reasoning_content field back there, tool calls
// in tool_calls, and the message's carried members.
func (l *lowerer) chatAssistant(i int, m *compactorv1.Message) {
	w := &l.w
	mo := m.GetProviderOptions()
	audio := option(mo, "openai", "audio") != nil
	var text, refusal, reasoning []*compactorv1.Part
	calls := 0
	for j, p := range m.GetParts() {
		at := where(i, j)
		o := p.GetProviderOptions()
		switch c := p.GetContent().(type) {
		case *compactorv1.Part_Text:
			switch {
			case l.opt(o, "openai", optRefusal).GetBoolValue():
				refusal = append(refusal, p)
			case c.Text.GetText() == "":
				if !audio { // an audio reply has no text
					l.dropPart(p, "%s: empty text dropped", at)
				}
			default:
				text = append(text, p)
			}
		case *compactorv1.Part_ToolCall:
			if c.ToolCall.GetProviderExecuted() {
				l.dropPart(p, "%s: provider-executed tool call has no OpenAI Chat form; dropped", at)
				continue
			}
			calls++
		case *compactorv1.Part_Reasoning:
			if l.opt(o, "openai", optReasoningText).GetBoolValue() {
				reasoning = append(reasoning, p)
				continue
			}
			l.dropPart(p, "%s: reasoning cannot be sent to OpenAI Chat; dropped", at)
		case *compactorv1.Part_Provider:
			l.dropProviderPart(at, p)
		default:
			l.dropNoForm(p, at, "OpenAI Chat")
		}
	}
	if len(text) == 0 && len(refusal) == 0 && calls == 0 && !audio {
		l.warn("messages[%d]: nothing left to send; message dropped", i)
		return
	}
	w.obj()
	w.kstr("role", "assistant")
	w.key("content")
	if len(text) > 0 {
		l.joinedTexts(text)
	} else {
		w.raw("null")
	}
	if len(refusal) > 0 {
		w.key("refusal")
		l.joinedTexts(refusal)
	}
	if len(reasoning) > 0 {
		w.key(optReasoningText)
		w.comma()
		w.b = append(w.b, '"')
		for _, p := range reasoning {
			w.b = appendEscaped(w.b, p.GetReasoning().GetText())
		}
		w.b = append(w.b, '"')
	}
	l.writeCarried(mo, "openai", chatAssistantCarried)
	if calls > 0 {
		w.key("tool_calls")
		w.arr()
		for _, p := range m.GetParts() {
			c := p.GetToolCall()
			if c == nil || c.GetProviderExecuted() {
				continue
			}
			w.obj()
			w.kstr("id", c.GetToolCallId())
			w.kstr("type", "function")
			w.key("function")
			w.obj()
			w.kstr("name", c.GetToolName())
			w.kstr("arguments", c.GetInputJson())
			w.endObj()
			if option(p.GetProviderOptions(), "openai", "extra_content") != nil {
				l.opt(p.GetProviderOptions(), "google", optThoughtSig) // it travels inside extra_content
			}
			l.writeCarried(p.GetProviderOptions(), "openai", chatToolCallCarried)
			w.endObj()
		}
		w.endArr()
	}
	w.endObj()
}

// joinedTexts writes text parts concatenated as one string, escaped straight into the
// buffer.
func (l *lowerer) joinedTexts(parts []*compactorv1.Part) {
	w := &l.w
	w.comma()
	w.b = append(w.b, '"')
	for _, p := range parts {
		t, _ := textOf(p)
		w.b = appendEscaped(w.b, t)
	}
	w.b = append(w.b, '"')
}

// --- Lift ---

func (lt *lifter) chat(body string) error {
	mp := lt.root.k("messages")
	msgs := field(body, "messages")
	if err := want(msgs, kindArray, mp); err != nil {
		return err
	}
	for i, m := range elems(msgs) {
		lt.from(mp.i(i))
		if err := lt.chatMessage(m, mp.i(i)); err != nil {
			return err
		}
	}
	return nil
}

func (lt *lifter) chatMessage(m string, p *jpath) error {
	if err := want(m, kindObject, p); err != nil {
		return err
	}
	role, err := str(field(m, "role"), p.k("role"), true)
	if err != nil {
		return err
	}
	content := field(m, "content")
	cp := p.k("content")
	switch role {
	case "system", "developer":
		var o map[string]*structpb.Struct
		lt.unknownKeysC(m, p, &o, "openai", chatMessageCarried, "role", "content")
		parts, err := lt.chatTextParts(content, cp)
		if err != nil {
			return err
		}
		if len(parts) == 0 {
			lt.warn(cp, "empty system message skipped")
		}
		if msg := lt.add(compactorv1.Role_ROLE_SYSTEM, parts); msg != nil {
			msg.ProviderOptions = o
		}
	case "user":
		var o map[string]*structpb.Struct
		lt.unknownKeysC(m, p, &o, "openai", chatMessageCarried, "role", "content")
		var parts []*compactorv1.Part
		switch kindOf(content) {
		case kindString:
			parts = append(parts, textPart(unquote(content)))
		case kindArray:
			for i, e := range elems(content) {
				part, err := chatUserPart(e, cp.i(i))
				if err != nil {
					return err
				}
				parts = append(parts, part)
			}
		default:
			return cp.invalid("must be a string or an array of content parts, not " + kindName(kindOf(content)))
		}
		if len(parts) == 0 {
			lt.warn(cp, "empty content; message skipped")
		}
		if msg := lt.add(compactorv1.Role_ROLE_USER, parts); msg != nil {
			msg.ProviderOptions = o
		}
	case "assistant":
		return lt.chatAssistant(m, p)
	case "tool":
		lt.unknownKeys(m, p, "role", "content", "tool_call_id", "name")
		id, err := str(field(m, "tool_call_id"), p.k("tool_call_id"), true)
		if err != nil {
			return err
		}
		name, err := str(field(m, "name"), p.k("name"), false)
		if err != nil {
			return err
		}
		if name == "" {
			name = lt.names[id]
		}
		var out *compactorv1.ToolOutput
		switch kindOf(content) {
		case kindString:
			out = textOut(unquote(content))
		case kindNull, kindInvalid:
			out = textOut("")
		case kindArray:
			parts, err := lt.chatTextParts(content, cp)
			if err != nil {
				return err
			}
			out = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: parts}}}
			if len(parts) == 0 {
				out = textOut("")
			}
		default:
			return cp.invalid("must be a string or an array of text parts, not " + kindName(kindOf(content)))
		}
		lt.add(compactorv1.Role_ROLE_TOOL, []*compactorv1.Part{resultPart(id, name, out)})
	default:
		return p.k("role").invalid(`unsupported role "` + role + `" (expected system, developer, user, assistant or tool)`)
	}
	return nil
}

// chatTextParts reads a string or an array of {"type":"text"} parts.
func (lt *lifter) chatTextParts(content string, p *jpath) ([]*compactorv1.Part, error) {
	switch kindOf(content) {
	case kindString:
		return []*compactorv1.Part{textPart(unquote(content))}, nil
	case kindNull, kindInvalid:
		return nil, nil
	case kindArray:
		var parts []*compactorv1.Part
		for i, e := range elems(content) {
			ep := p.i(i)
			if err := want(e, kindObject, ep); err != nil {
				return nil, err
			}
			if typ := sval(field(e, "type")); typ != "text" {
				return nil, ep.k("type").invalid(`must be "text"`)
			}
			t, err := str(field(e, "text"), ep.k("text"), true)
			if err != nil {
				return nil, err
			}
			parts = append(parts, textPart(t))
		}
		return parts, nil
	}
	return nil, p.invalid("must be a string or an array of text parts, not " + kindName(kindOf(content)))
}

func chatUserPart(e string, p *jpath) (*compactorv1.Part, error) {
	if err := want(e, kindObject, p); err != nil {
		return nil, err
	}
	typ, err := str(field(e, "type"), p.k("type"), true)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "text":
		t, err := str(field(e, "text"), p.k("text"), true)
		if err != nil {
			return nil, err
		}
		return textPart(t), nil
	case "image_url":
		ip := p.k("image_url")
		iu := field(e, "image_url")
		var u, detail string
		switch kindOf(iu) {
		case kindString: // some clients send the URL directly
			u = unquote(iu)
		case kindObject:
			if u, err = str(field(iu, "url"), ip.k("url"), true); err != nil {
				return nil, err
			}
			if detail, err = str(field(iu, "detail"), ip.k("detail"), false); err != nil {
				return nil, err
			}
		default:
			return nil, want(iu, kindObject, ip)
		}
		return openaiImage(u, detail), nil
	case "input_audio":
		ap := p.k("input_audio")
		a := field(e, "input_audio")
		if err := want(a, kindObject, ap); err != nil {
			return nil, err
		}
		data, err := b64(field(a, "data"), ap.k("data"))
		if err != nil {
			return nil, err
		}
		format, err := str(field(a, "format"), ap.k("format"), true)
		if err != nil {
			return nil, err
		}
		media := "audio/mpeg"
		if format == "wav" {
			media = "audio/wav"
		}
		return fileData(data, media, ""), nil
	case "file":
		fp := p.k("file")
		f := field(e, "file")
		if err := want(f, kindObject, fp); err != nil {
			return nil, err
		}
		name, err := str(field(f, "filename"), fp.k("filename"), false)
		if err != nil {
			return nil, err
		}
		fd, err := str(field(f, "file_data"), fp.k("file_data"), false)
		if err != nil {
			return nil, err
		}
		if fd == "" {
			return nil, fp.k("file_data").invalid("only inline files (file_data) are supported, not file_id references")
		}
		return inlineFile(fd, name, fp.k("file_data"))
	}
	return nil, p.k("type").invalid(`unsupported content part type "` + typ + `"`)
}

func (lt *lifter) chatAssistant(m string, p *jpath) error {
	var o map[string]*structpb.Struct
	lt.unknownKeysC(m, p, &o, "openai", chatAssistantCarried, "role", "content", "tool_calls", "refusal", optReasoningText)
	content := field(m, "content")
	cp := p.k("content")
	var text, refusal strings.Builder
	switch kindOf(content) {
	case kindString:
		text.WriteString(unquote(content))
	case kindNull, kindInvalid:
	case kindArray:
		for i, e := range elems(content) {
			ep := cp.i(i)
			if err := want(e, kindObject, ep); err != nil {
				return err
			}
			switch typ := sval(field(e, "type")); typ {
			case "text":
				t, err := str(field(e, "text"), ep.k("text"), true)
				if err != nil {
					return err
				}
				text.WriteString(t)
			case "refusal":
				t, err := str(field(e, "refusal"), ep.k("refusal"), true)
				if err != nil {
					return err
				}
				refusal.WriteString(t)
			default:
				return ep.k("type").invalid(`must be "text" or "refusal"`)
			}
		}
	default:
		return cp.invalid("must be a string, null or an array of text parts, not " + kindName(kindOf(content)))
	}
	r, err := str(field(m, "refusal"), p.k("refusal"), false)
	if err != nil {
		return err
	}
	refusal.WriteString(r)
	var parts []*compactorv1.Part
	// DeepSeek's and others' reasoning_content (not in OpenAI's API): reasoning, sent back
	// to Chat where it came from.
	rc, err := str(field(m, optReasoningText), p.k(optReasoningText), false)
	if err != nil {
		return err
	}
	if rc != "" {
		part := &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: rc}}}
		setOpt(&part.ProviderOptions, "openai", optReasoningText, structpb.NewBoolValue(true))
		parts = append(parts, part)
	}
	if text.Len() > 0 {
		parts = append(parts, textPart(text.String()))
	}
	if refusal.Len() > 0 {
		part := textPart(refusal.String())
		setOpt(&part.ProviderOptions, "openai", optRefusal, structpb.NewBoolValue(true))
		parts = append(parts, part)
	}
	tcp := p.k("tool_calls")
	tcs := field(m, "tool_calls")
	switch kindOf(tcs) {
	case kindNull, kindInvalid:
	case kindArray:
		for i, tc := range elems(tcs) {
			ep := tcp.i(i)
			if err := want(tc, kindObject, ep); err != nil {
				return err
			}
			if typ := sval(field(tc, "type")); typ != "" && typ != "function" {
				return ep.k("type").invalid(`unsupported tool call type "` + typ + `"`)
			}
			id, err := str(field(tc, "id"), ep.k("id"), true)
			if err != nil {
				return err
			}
			fp := ep.k("function")
			fn := field(tc, "function")
			if err := want(fn, kindObject, fp); err != nil {
				return err
			}
			part, err := lt.functionCall(id, fn, fp)
			if err != nil {
				return err
			}
			carry(&part.ProviderOptions, tc, "openai", chatToolCallCarried)
			// Gemini's OpenAI-compatible endpoint: the call's thought signature.
			if sig := sval(field(field(field(tc, "extra_content"), "google"), "thought_signature")); sig != "" {
				setOpt(&part.ProviderOptions, "google", optThoughtSig, structpb.NewStringValue(sig))
			}
			parts = append(parts, part)
		}
	default:
		return want(tcs, kindArray, tcp)
	}
	if len(parts) == 0 {
		parts = append(parts, textPart(""))
	}
	lt.add(compactorv1.Role_ROLE_ASSISTANT, parts).ProviderOptions = o
	return nil
}
