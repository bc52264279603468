package format

import (
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
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
			l.writeCarried(m.GetProviderOptions(), "openai", responsesMessageCarried)
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
			l.writeCarried(m.GetProviderOptions(), "openai", responsesMessageCarried)
			w.endObj()
		case compactorv1.Role_ROLE_ASSISTANT:
			if l.responsesAssistant(s.i, m, inlineReasoning) {
				needInclude = true
			}
		case compactorv1.Role_ROLE_TOOL:
			for j, p := range m.GetParts() {
				at := where(s.i, j)
				r := l.toolResultOrDrop(p, at, "OpenAI Responses")
				if r == nil {
					continue
				}
				o := p.GetProviderOptions()
				w.obj()
				w.kstr("type", "function_call_output")
				if id := l.optString(o, "openai", optItemID); id != "" {
					w.kstr("id", id)
				}
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
				l.writeCarried(o, "openai", responsesOutputCarried)
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
		w.typedText("input_text", c.Text.GetText())
	case *compactorv1.Part_Image:
		w.obj()
		w.kstr("type", "input_image")
		w.key("image_url")
		l.imageURLValue(c.Image, at)
		l.openaiImageDetail(p)
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
	case *compactorv1.Part_Provider:
		l.dropProviderPart(at, p)
	default:
		l.dropNoForm(p, at, "OpenAI Responses")
	}
}

// responsesAssistant writes an assistant message as items in part order: text as message
// items, each tool call as a function_call, reasoning inline or as an item reference, an
// OpenAI ProviderPart (a compaction) as it came. It reports whether inline reasoning with
// encrypted content was written under store=false (which needs "include").
//
// Text without an item id goes as {"type":"message","role":"assistant","content":"..."}: the
// API takes it, and unlike an output_text list without the output message's id and status it
// is a shape the official SDK's input item types recognize. Text with an item id (lifted from
// an output message) goes back as that output message: consecutive parts with the same id
// are its content, each output_text with its annotations and logprobs.
func (l *lowerer) responsesAssistant(i int, m *compactorv1.Message, storeFalse bool) bool {
	w := &l.w
	inlined := false
	parts := m.GetParts()
	for j := 0; j < len(parts); j++ {
		p := parts[j]
		at := where(i, j)
		o := p.GetProviderOptions()
		switch c := p.GetContent().(type) {
		case *compactorv1.Part_Text:
			if id := optionString(o, "openai", optItemID); id != "" {
				k := j + 1
				for k < len(parts) && parts[k].GetText() != nil && optionString(parts[k].GetProviderOptions(), "openai", optItemID) == id {
					k++
				}
				l.responsesOutputMessage(parts[j:k])
				j = k - 1
				continue
			}
			if c.Text.GetText() == "" {
				l.dropPart(p, "%s: empty text dropped", at)
				continue
			}
			w.obj()
			w.kstr("type", "message")
			w.kstr("role", "assistant")
			w.kstr("content", c.Text.GetText())
			l.writeCarried(o, "openai", responsesInputCarried)
			w.endObj()
		case *compactorv1.Part_ToolCall:
			if c.ToolCall.GetProviderExecuted() {
				l.dropPart(p, "%s: provider-executed tool call has no OpenAI Responses form; dropped", at)
				continue
			}
			w.obj()
			w.kstr("type", "function_call")
			if id := l.optString(o, "openai", optItemID); id != "" {
				w.kstr("id", id)
			}
			w.kstr("call_id", c.ToolCall.GetToolCallId())
			w.kstr("name", c.ToolCall.GetToolName())
			w.kstr("arguments", c.ToolCall.GetInputJson())
			l.writeCarried(o, "openai", responsesCallCarried)
			w.endObj()
		case *compactorv1.Part_Reasoning:
			if l.responsesReasoning(p, at, storeFalse) {
				inlined = true
			}
		case *compactorv1.Part_Provider:
			if providerPartOf(p, engine.ProviderOpenAI) == nil {
				l.dropProviderPart(at, p)
				continue
			}
			w.raw(c.Provider.GetJson())
		default:
			l.dropNoForm(p, at, "OpenAI Responses")
		}
	}
	return inlined
}

// responsesOutputMessage writes text parts sharing an item id as that output message.
func (l *lowerer) responsesOutputMessage(parts []*compactorv1.Part) {
	w := &l.w
	o := parts[0].GetProviderOptions()
	w.obj()
	w.kstr("type", "message")
	w.kstr("id", l.optString(o, "openai", optItemID))
	w.kstr("role", "assistant")
	l.writeCarried(o, "openai", responsesItemCarried)
	w.key("content")
	w.arr()
	for k, p := range parts {
		po := p.GetProviderOptions()
		if k > 0 { // the item's members were written from the first part
			l.opt(po, "openai", optItemID)
			for _, n := range responsesItemCarried {
				l.opt(po, "openai", n)
			}
		}
		t, _ := textOf(p)
		w.obj()
		if l.opt(po, "openai", optRefusal).GetBoolValue() {
			w.kstr("type", "refusal")
			w.kstr("refusal", t)
		} else {
			w.kstr("type", "output_text")
			w.kstr("text", t)
			if option(po, "openai", "annotations") == nil {
				w.key("annotations") // required by the output message
				w.raw("[]")
			}
			l.writeCarried(po, "openai", responsesTextCarried)
		}
		w.endObj()
	}
	w.endArr()
	w.endObj()
}

// responsesReasoning writes a reasoning part: inline when it came inline (its summary list
// was kept) or, under store=false, when it has encrypted content; else as an item reference
// to its id. It reports whether it wrote encrypted content inline under store=false.
func (l *lowerer) responsesReasoning(p *compactorv1.Part, at loc, storeFalse bool) bool {
	w := &l.w
	o := p.GetProviderOptions()
	// Each option is looked up once; the id and encrypted content count as carried only
	// when they are non-empty strings, as they are only then written.
	idv, encv, sum := option(o, "openai", optItemID), option(o, "openai", optEncrypted), option(o, "openai", "summary")
	id, enc := idv.GetStringValue(), encv.GetStringValue()
	text := p.GetReasoning().GetText()
	switch {
	case sum != nil || (storeFalse && enc != ""):
		w.obj()
		w.kstr("type", "reasoning")
		if id != "" {
			l.use(idv)
			w.kstr("id", id)
		}
		w.key("summary")
		if sum != nil && summaryText(sum) == text {
			l.use(sum)
			w.value(sum)
		} else {
			w.arr()
			if text != "" {
				w.typedText("summary_text", text)
			}
			w.endArr()
		}
		if enc != "" {
			l.use(encv)
			w.kstr("encrypted_content", enc)
		}
		l.writeCarried(o, "openai", responsesReasonRest)
		w.endObj()
		return storeFalse && enc != ""
	case id != "":
		w.obj()
		w.kstr("type", "item_reference")
		l.use(idv)
		w.kstr("id", id)
		w.endObj()
		if enc != "" { // the stored item holds it
			l.use(encv)
		}
	default:
		l.dropPart(p, "%s: reasoning without an OpenAI item id (or encrypted content with store=false) cannot be sent; dropped", at)
	}
	return false
}

// summaryText joins the texts of a reasoning summary list as Lift does.
func summaryText(v *structpb.Value) string {
	var texts []string
	for _, e := range v.GetListValue().GetValues() {
		texts = append(texts, e.GetStructValue().GetFields()["text"].GetStringValue())
	}
	return strings.Join(texts, "\n\n")
}

// --- Lift ---

func (lt *lifter) responses(body string) error {
	if ins := field(body, "instructions"); ins != "" {
		lt.from(lt.root.k("instructions"))
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
		lt.from(ip)
		lt.add(compactorv1.Role_ROLE_USER, []*compactorv1.Part{textPart(unquote(input))})
		return nil
	case kindArray:
	default:
		return ip.invalid("must be a string or an array of items, not " + kindName(kindOf(input)))
	}
	for i, item := range elems(input) {
		lt.from(ip.i(i))
		if err := lt.responsesItem(item, ip.i(i)); err != nil {
			return err
		}
	}
	return nil
}

// appendTo adds parts to the last message when it has the role (and is not a provider
// compaction, which stays alone), else starts a message. It takes constant time, so that
// lifting a long run of items of one role stays linear.
func (lt *lifter) appendTo(role compactorv1.Role, parts ...*compactorv1.Part) {
	if n := len(lt.msgs); n > 0 && lt.msgs[n-1].GetRole() == role && lt.msgs[n-1] != lt.alone {
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
		var o map[string]*structpb.Struct
		lt.unknownKeysC(item, p, &o, "openai", responsesCallCarried, "type", "id", "call_id", "name", "arguments")
		id, err := str(field(item, "call_id"), p.k("call_id"), true)
		if err != nil {
			return err
		}
		part, err := lt.functionCall(id, item, p)
		if err != nil {
			return err
		}
		part.ProviderOptions = o
		if err := itemID(&part.ProviderOptions, item, p); err != nil {
			return err
		}
		lt.appendTo(compactorv1.Role_ROLE_ASSISTANT, part)
	case "function_call_output":
		var o map[string]*structpb.Struct
		lt.unknownKeysC(item, p, &o, "openai", responsesOutputCarried, "type", "id", "call_id", "output")
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
		part := resultPart(id, lt.names[id], out)
		part.ProviderOptions = o
		if err := itemID(&part.ProviderOptions, item, p); err != nil {
			return err
		}
		lt.appendTo(compactorv1.Role_ROLE_TOOL, part)
	case "reasoning":
		var o map[string]*structpb.Struct
		lt.unknownKeysC(item, p, &o, "openai", responsesReasonCarried, "type", "id", "encrypted_content")
		if err := itemID(&o, item, p); err != nil { // the id first, so that its error comes first
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
		part := &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: strings.Join(texts, "\n\n")}}, ProviderOptions: o}
		if enc != "" {
			setOpt(&part.ProviderOptions, "openai", optEncrypted, structpb.NewStringValue(enc))
		}
		lt.appendTo(compactorv1.Role_ROLE_ASSISTANT, part)
	case "compaction":
		// A compaction /responses/compact made: opaque, a summary boundary of its own.
		lt.alone = lt.add(compactorv1.Role_ROLE_ASSISTANT, []*compactorv1.Part{opaquePart(engine.ProviderOpenAI, typ, item)})
	case "item_reference":
		id, err := str(field(item, "id"), p.k("id"), true)
		if err != nil {
			return err
		}
		part := &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{}}}
		setOpt(&part.ProviderOptions, "openai", optItemID, structpb.NewStringValue(id))
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
	// An assistant message's item members travel on each of its text parts.
	var item0 map[string]*structpb.Struct
	if role == "assistant" {
		if err := itemID(&item0, item, p); err != nil {
			return err
		}
		carry(&item0, item, "openai", responsesItemCarried)
	}
	withItem := func(part *compactorv1.Part) *compactorv1.Part {
		for k, v := range item0["openai"].GetFields() {
			setOpt(&part.ProviderOptions, "openai", k, v)
		}
		return part
	}
	cp := p.k("content")
	content := field(item, "content")
	var parts []*compactorv1.Part
	switch kindOf(content) {
	case kindString:
		parts = []*compactorv1.Part{withItem(textPart(unquote(content)))}
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
					part := withItem(textPart(t))
					lt.unknownKeysC(e, ep, &part.ProviderOptions, "openai", responsesTextCarried, "type", "text")
					parts = append(parts, part)
				case "refusal":
					t, err := str(field(e, "refusal"), ep.k("refusal"), true)
					if err != nil {
						return err
					}
					part := withItem(textPart(t))
					setOpt(&part.ProviderOptions, "openai", optRefusal, structpb.NewBoolValue(true))
					parts = append(parts, part)
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
		if msg := lt.add(compactorv1.Role_ROLE_USER, parts); msg != nil {
			carry(&msg.ProviderOptions, item, "openai", responsesMessageCarried)
		}
	case "system", "developer":
		for k, part := range parts {
			if part.GetText() == nil {
				return cp.i(k).k("type").invalid("system messages hold text only")
			}
		}
		if len(parts) == 0 {
			lt.warn(cp, "empty system message skipped")
		}
		if msg := lt.add(compactorv1.Role_ROLE_SYSTEM, parts); msg != nil {
			carry(&msg.ProviderOptions, item, "openai", responsesMessageCarried)
		}
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
		return openaiImage(u, detail), nil
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
			return inlineFile(fd, name, p.k("file_data"))
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

// itemID keeps an item's id as provider_options.openai.itemId.
func itemID(o *map[string]*structpb.Struct, item string, p *jpath) error {
	id, err := str(field(item, "id"), p.k("id"), false)
	if err == nil && id != "" {
		setOpt(o, "openai", optItemID, structpb.NewStringValue(id))
	}
	return err
}
