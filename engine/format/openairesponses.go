package format

import (
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// responsesFields are the conversation fields of an OpenAI Responses body. "include" is
// rewritten (not dropped) when inline reasoning needs it.
var responsesFields = []string{"input", "instructions"}

func (l *lowerer) responses() {
	w := &l.w
	sysRole := l.systemRole()
	inlineReasoning := strings.TrimSpace(l.baseField("store")) == "false"
	needInclude := false
	w.key("input")
	w.arr()
	for _, s := range l.msgs {
		m := s.m
		switch m.GetRole() {
		case compactorv1.Role_ROLE_SYSTEM:
			w.obj()
			w.kstr("type", "message")
			w.kstr("role", sysRole)
			w.key("content")
			l.chatTexts(m.GetParts(), "input_text")
			w.endObj()
		case compactorv1.Role_ROLE_USER:
			parts := l.keptParts(s.i, m)
			if len(parts) == 0 {
				l.warn("messages[%d]: nothing left to send; message dropped", s.i)
				continue
			}
			w.obj()
			w.kstr("type", "message")
			w.kstr("role", "user")
			w.key("content")
			w.arr()
			for j, p := range parts {
				l.responsesInputPart(p, where(s.i, j))
			}
			w.endArr()
			w.endObj()
		case compactorv1.Role_ROLE_ASSISTANT:
			if l.responsesAssistant(s.i, m, inlineReasoning) {
				needInclude = true
			}
		case compactorv1.Role_ROLE_TOOL:
			for j, p := range m.GetParts() {
				at := where(s.i, j)
				r := p.GetToolResult()
				if r == nil {
					l.warn("%s: %s has no OpenAI Responses form; dropped", at, partKind(p))
					continue
				}
				w.obj()
				w.kstr("type", "function_call_output")
				w.kstr("call_id", r.GetToolCallId())
				w.key("output")
				if c := r.GetOutput().GetContent(); c != nil {
					w.arr()
					for k, cp := range c.GetParts() {
						l.responsesInputPart(cp, at.part(k))
					}
					w.endArr()
				} else {
					w.str(outputText(r.GetOutput()))
				}
				w.endObj()
			}
		}
	}
	w.endArr()
	include := l.baseField("include")
	if needInclude || include != "" {
		w.key("include")
		w.arr()
		has := false
		for _, e := range elems(include) {
			w.raw(e)
			has = has || sval(e) == "reasoning.encrypted_content"
		}
		if needInclude && !has {
			w.str("reasoning.encrypted_content")
		}
		w.endArr()
	}
}

// responsesInputPart writes an input_text / input_image / input_file content part.
func (l *lowerer) responsesInputPart(p *compactorv1.Part, at loc) {
	w := &l.w
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		w.obj()
		w.kstr("type", "input_text")
		w.kstr("text", c.Text.GetText())
		w.endObj()
	case *compactorv1.Part_Image:
		w.obj()
		w.kstr("type", "input_image")
		w.key("image_url")
		if u := c.Image.GetUrl(); u != "" {
			w.str(u)
		} else {
			w.dataURL(l.imageMedia(c.Image, at), c.Image.GetData())
		}
		if d := optionString(p.GetProviderOptions(), "openai", "imageDetail"); d != "" {
			w.kstr("detail", d)
		}
		w.endObj()
	case *compactorv1.Part_File:
		f := c.File
		w.obj()
		w.kstr("type", "input_file")
		if n := f.GetFilename(); n != "" {
			w.kstr("filename", n)
		}
		switch u := f.GetUrl(); {
		case u == "":
			w.key("file_data")
			w.dataURL(f.GetMediaType(), f.GetData())
		case strings.HasPrefix(u, "data:"):
			w.kstr("file_data", u)
		default:
			w.kstr("file_url", u)
		}
		w.endObj()
	default:
		l.warn("%s: %s has no OpenAI Responses form; dropped", at, partKind(p))
	}
}

// responsesAssistant writes an assistant message as items in part order: each text as a
// message item with string content, each tool call as a function_call, reasoning as an item
// reference or inline. It reports whether inline reasoning was written (which needs
// "include").
//
// Assistant text goes as {"type":"message","role":"assistant","content":"..."}: the API takes
// it, and unlike an output_text list without the output message's id and status it is a shape
// the official SDK's input item types recognize.
func (l *lowerer) responsesAssistant(i int, m *compactorv1.Message, inlineReasoning bool) bool {
	w := &l.w
	inlined := false
	for j, p := range m.GetParts() {
		at := where(i, j)
		switch c := p.GetContent().(type) {
		case *compactorv1.Part_Text:
			if c.Text.GetText() == "" {
				l.warn("%s: empty text dropped", at)
				continue
			}
			w.obj()
			w.kstr("type", "message")
			w.kstr("role", "assistant")
			w.kstr("content", c.Text.GetText())
			w.endObj()
		case *compactorv1.Part_ToolCall:
			if c.ToolCall.GetProviderExecuted() {
				l.warn("%s: provider-executed tool call has no OpenAI Responses form; dropped", at)
				continue
			}
			w.obj()
			w.kstr("type", "function_call")
			w.kstr("call_id", c.ToolCall.GetToolCallId())
			w.kstr("name", c.ToolCall.GetToolName())
			w.kstr("arguments", c.ToolCall.GetInputJson())
			w.endObj()
		case *compactorv1.Part_Reasoning:
			o := p.GetProviderOptions()
			id := optionString(o, "openai", "itemId")
			enc := optionString(o, "openai", "reasoningEncryptedContent")
			switch {
			case inlineReasoning && enc != "":
				w.obj()
				w.kstr("type", "reasoning")
				if id != "" {
					w.kstr("id", id)
				}
				w.kstr("encrypted_content", enc)
				w.key("summary")
				w.arr()
				if t := c.Reasoning.GetText(); t != "" {
					w.obj()
					w.kstr("type", "summary_text")
					w.kstr("text", t)
					w.endObj()
				}
				w.endArr()
				w.endObj()
				inlined = true
			case id != "":
				w.obj()
				w.kstr("type", "item_reference")
				w.kstr("id", id)
				w.endObj()
			default:
				l.warn("%s: reasoning without an OpenAI item id (or encrypted content with store=false) cannot be sent; dropped", at)
			}
		default:
			l.warn("%s: %s has no OpenAI Responses form; dropped", at, partKind(p))
		}
	}
	return inlined
}

// --- Lift ---

func (lt *lifter) responses(body string) error {
	if ins := field(body, "instructions"); ins != "" {
		t, err := str(ins, lt.root.k("instructions"), false)
		if err != nil {
			return err
		}
		if t != "" {
			lt.add(compactorv1.Role_ROLE_SYSTEM, []*compactorv1.Part{textPart(t)})
		}
	}
	ip := lt.root.k("input")
	input := field(body, "input")
	switch kindOf(input) {
	case kindString:
		lt.add(compactorv1.Role_ROLE_USER, []*compactorv1.Part{textPart(unquote(input))})
		return nil
	case kindArray:
	default:
		return ip.invalid("must be a string or an array of items, not " + kindName(kindOf(input)))
	}
	for i, item := range elems(input) {
		if err := lt.responsesItem(item, ip.i(i)); err != nil {
			return err
		}
	}
	return nil
}

// appendTo adds parts to the last message when it has the role, else starts a message.
func (lt *lifter) appendTo(role compactorv1.Role, parts ...*compactorv1.Part) {
	if n := len(lt.msgs); n > 0 && lt.msgs[n-1].GetRole() == role {
		lt.msgs[n-1].Parts = append(lt.msgs[n-1].Parts, parts...)
		return
	}
	lt.add(role, parts)
}

func (lt *lifter) responsesItem(item string, p *jpath) error {
	if err := want(item, kindObject, p); err != nil {
		return err
	}
	typ, err := str(field(item, "type"), p.k("type"), false)
	if err != nil {
		return err
	}
	switch typ {
	case "", "message":
		return lt.responsesMessage(item, p)
	case "function_call":
		lt.unknownKeys(item, p, "type", "id", "call_id", "name", "arguments", "status")
		id, err := str(field(item, "call_id"), p.k("call_id"), true)
		if err != nil {
			return err
		}
		name, err := str(field(item, "name"), p.k("name"), true)
		if err != nil {
			return err
		}
		args, err := str(field(item, "arguments"), p.k("arguments"), false)
		if err != nil {
			return err
		}
		lt.call(id, name)
		lt.appendTo(compactorv1.Role_ROLE_ASSISTANT, callPart(id, name, args))
	case "function_call_output":
		lt.unknownKeys(item, p, "type", "id", "call_id", "output", "status")
		id, err := str(field(item, "call_id"), p.k("call_id"), true)
		if err != nil {
			return err
		}
		op := p.k("output")
		output := field(item, "output")
		var out *compactorv1.ToolOutput
		switch kindOf(output) {
		case kindString:
			out = textOut(unquote(output))
		case kindNull, kindInvalid:
			out = textOut("")
		case kindArray:
			var parts []*compactorv1.Part
			for k, e := range elems(output) {
				part, err := responsesInputPart(e, op.i(k))
				if err != nil {
					return err
				}
				parts = append(parts, part)
			}
			out = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: parts}}}
			if len(parts) == 0 {
				out = textOut("")
			}
		default:
			return op.invalid("must be a string or an array of content parts, not " + kindName(kindOf(output)))
		}
		lt.appendTo(compactorv1.Role_ROLE_TOOL, resultPart(id, lt.names[id], out))
	case "reasoning":
		lt.unknownKeys(item, p, "type", "id", "summary", "encrypted_content", "content", "status")
		id, err := str(field(item, "id"), p.k("id"), false)
		if err != nil {
			return err
		}
		enc, err := str(field(item, "encrypted_content"), p.k("encrypted_content"), false)
		if err != nil {
			return err
		}
		var texts []string
		for k, e := range elems(field(item, "summary")) {
			t, err := str(field(e, "text"), p.k("summary").i(k).k("text"), false)
			if err != nil {
				return err
			}
			texts = append(texts, t)
		}
		part := &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: strings.Join(texts, "\n\n")}}}
		if id != "" {
			setOpt(&part.ProviderOptions, "openai", "itemId", structpb.NewStringValue(id))
		}
		if enc != "" {
			setOpt(&part.ProviderOptions, "openai", "reasoningEncryptedContent", structpb.NewStringValue(enc))
		}
		lt.appendTo(compactorv1.Role_ROLE_ASSISTANT, part)
	case "item_reference":
		id, err := str(field(item, "id"), p.k("id"), true)
		if err != nil {
			return err
		}
		part := &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{}}}
		setOpt(&part.ProviderOptions, "openai", "itemId", structpb.NewStringValue(id))
		lt.appendTo(compactorv1.Role_ROLE_ASSISTANT, part)
	default:
		return p.k("type").invalid(`unsupported input item type "` + typ + `"`)
	}
	return nil
}

func (lt *lifter) responsesMessage(item string, p *jpath) error {
	lt.unknownKeys(item, p, "type", "role", "content", "id", "status", "phase")
	role, err := str(field(item, "role"), p.k("role"), true)
	if err != nil {
		return err
	}
	cp := p.k("content")
	content := field(item, "content")
	var parts []*compactorv1.Part
	switch kindOf(content) {
	case kindString:
		parts = []*compactorv1.Part{textPart(unquote(content))}
	case kindArray:
		for k, e := range elems(content) {
			ep := cp.i(k)
			if role == "assistant" {
				if err := want(e, kindObject, ep); err != nil {
					return err
				}
				switch typ := sval(field(e, "type")); typ {
				case "output_text", "input_text":
					t, err := str(field(e, "text"), ep.k("text"), true)
					if err != nil {
						return err
					}
					parts = append(parts, textPart(t))
				case "refusal":
					t, err := str(field(e, "refusal"), ep.k("refusal"), true)
					if err != nil {
						return err
					}
					lt.warn(ep, "refusal carried as text")
					parts = append(parts, textPart(t))
				default:
					return ep.k("type").invalid(`unsupported assistant content type "` + typ + `"`)
				}
				continue
			}
			part, err := responsesInputPart(e, ep)
			if err != nil {
				return err
			}
			parts = append(parts, part)
		}
	default:
		return cp.invalid("must be a string or an array of content parts, not " + kindName(kindOf(content)))
	}
	switch role {
	case "user":
		if len(parts) == 0 {
			lt.warn(cp, "empty content; message skipped")
		}
		lt.add(compactorv1.Role_ROLE_USER, parts)
	case "system", "developer":
		for k, part := range parts {
			if part.GetText() == nil {
				return cp.i(k).k("type").invalid("system messages hold text only")
			}
		}
		if len(parts) == 0 {
			lt.warn(cp, "empty system message skipped")
		}
		lt.add(compactorv1.Role_ROLE_SYSTEM, parts)
	case "assistant":
		if len(parts) > 0 {
			lt.appendTo(compactorv1.Role_ROLE_ASSISTANT, parts...)
		}
	default:
		return p.k("role").invalid(`unsupported role "` + role + `"`)
	}
	return nil
}

// responsesInputPart reads input_text / input_image / input_file.
func responsesInputPart(e string, p *jpath) (*compactorv1.Part, error) {
	if err := want(e, kindObject, p); err != nil {
		return nil, err
	}
	typ, err := str(field(e, "type"), p.k("type"), true)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "input_text", "output_text", "text":
		t, err := str(field(e, "text"), p.k("text"), true)
		if err != nil {
			return nil, err
		}
		return textPart(t), nil
	case "input_image":
		u, err := str(field(e, "image_url"), p.k("image_url"), false)
		if err != nil {
			return nil, err
		}
		if u == "" {
			return nil, p.k("image_url").invalid("only images by URL or data URL are supported, not file_id references")
		}
		detail, err := str(field(e, "detail"), p.k("detail"), false)
		if err != nil {
			return nil, err
		}
		part := imageURL(u, "")
		if detail != "" {
			setOpt(&part.ProviderOptions, "openai", "imageDetail", structpb.NewStringValue(detail))
		}
		return part, nil
	case "input_file":
		name, err := str(field(e, "filename"), p.k("filename"), false)
		if err != nil {
			return nil, err
		}
		fd, err := str(field(e, "file_data"), p.k("file_data"), false)
		if err != nil {
			return nil, err
		}
		fu, err := str(field(e, "file_url"), p.k("file_url"), false)
		if err != nil {
			return nil, err
		}
		switch {
		case fd != "":
			media, data, ok := parseDataURL(fd)
			if !ok {
				if data, err = decodeB64(fd); err != nil {
					return nil, p.k("file_data").invalid("must be a base64 data: URL")
				}
				media = "application/pdf"
			}
			return fileData(data, media, name), nil
		case fu != "":
			return fileURL(fu, mediaFromName(fu, name), name), nil
		}
		return nil, p.k("file_data").invalid("only inline files (file_data) or file_url are supported, not file_id references")
	}
	return nil, p.k("type").invalid(`unsupported content part type "` + typ + `"`)
}

// mediaFromName guesses a file's media type from its URL or name; PDF when unknown.
func mediaFromName(names ...string) string {
	for _, n := range names {
		n = strings.ToLower(n)
		if i := strings.IndexAny(n, "?#"); i >= 0 {
			n = n[:i]
		}
		for ext, mt := range extMedia {
			if strings.HasSuffix(n, "."+ext) {
				return mt
			}
		}
	}
	return "application/pdf"
}
