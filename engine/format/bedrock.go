package format

import (
	"encoding/base64"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// bedrockFields are the conversation fields of a Bedrock Converse body.
var bedrockFields = []string{"system", "messages"}

// extMedia maps Converse document formats (also file extensions) to media types.
var extMedia = map[string]string{
	"pdf":  "application/pdf",
	"csv":  "text/csv",
	"doc":  "application/msword",
	"docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"xls":  "application/vnd.ms-excel",
	"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"html": "text/html",
	"txt":  "text/plain",
	"md":   "text/markdown",
}

// docFormat returns the Converse document format for a media type, or "".
func docFormat(media string) string {
	media = strings.ToLower(media)
	if i := strings.IndexByte(media, ';'); i >= 0 {
		media = strings.TrimSpace(media[:i])
	}
	for f, mt := range extMedia {
		if mt == media {
			return f
		}
	}
	return ""
}

// imageFormat returns the Converse image format for a media type, or "".
func imageFormat(media string) string {
	switch strings.ToLower(media) {
	case "image/png":
		return "png"
	case "image/jpeg", "image/jpg":
		return "jpeg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	}
	return ""
}

// docName makes a Converse document name: the file name without its extension, keeping only
// the characters the API allows (letters, digits, whitespace, hyphens, parentheses, square
// brackets) and no runs of whitespace.
func docName(filename string, n int) string {
	if i := strings.LastIndexByte(filename, '.'); i > 0 {
		filename = filename[:i]
	}
	var b strings.Builder
	space := false
	for _, r := range filename {
		ok := r == '-' || r == '(' || r == ')' || r == '[' || r == ']' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		switch {
		case ok:
			b.WriteRune(r)
			space = false
		case !space && b.Len() > 0:
			b.WriteByte(' ')
			space = true
		}
	}
	name := strings.TrimSpace(b.String())
	if name == "" {
		return "document-" + itoa(n)
	}
	return name
}

// bpart is one Converse content block to write.
type bpart struct {
	p     *compactorv1.Part
	at    loc
	text  string // text blocks
	asTxt bool   // a tool call or result rendered as text (toolText)
	cache *structpb.Value
}

type bmsg struct {
	role   string
	lo, hi int // the message's blocks are all[lo:hi]
}

// bedrockCache returns the cache point an options map asks for, or nil: Bedrock's own, else
// an Anthropic cache_control mapped to a default cache point.
func (l *lowerer) bedrockCache(o map[string]*structpb.Struct) *structpb.Value {
	v := l.opt(o, "bedrock", "cachePoint", "cache_point")
	if l.opt(o, "anthropic", "cacheControl", "cache_control") != nil && v == nil { // the same breakpoint
		return structpb.NewBoolValue(true)
	}
	return v
}

func (l *lowerer) bedrock() {
	w := &l.w
	tools := l.baseField("toolConfig") != ""
	toolsWarned := false
	var sys []bpart
	var out []bmsg
	n := 0
	for _, s := range l.msgs {
		n += len(s.m.GetParts())
	}
	all := make([]bpart, 0, n)
	for _, s := range l.msgs {
		m := s.m
		var parts []bpart
		if m.GetRole() == compactorv1.Role_ROLE_SYSTEM {
			parts = sys
		} else {
			parts = all
		}
		lo := len(parts)
		for j, p := range m.GetParts() {
			at := where(s.i, j)
			if pp := p.GetProvider(); pp != nil {
				l.dropProviderPart(at, p)
				continue
			}
			bp := bpart{p: p, at: at, cache: l.bedrockCache(p.GetProviderOptions())}
			switch c := p.GetContent().(type) {
			case *compactorv1.Part_Text:
				if isBlank(c.Text.GetText()) {
					l.dropBlankText(p, at, "Bedrock")
					continue
				}
				bp.text = c.Text.GetText()
			case *compactorv1.Part_Image:
				if !l.bedrockImageOK(c.Image, at) {
					l.markSkipped(p)
					continue
				}
			case *compactorv1.Part_File:
				if !l.bedrockFileOK(c.File, at) {
					l.markSkipped(p)
					continue
				}
			case *compactorv1.Part_Reasoning:
				if c.Reasoning.GetSignature() == "" && c.Reasoning.GetRedactedData() == "" {
					l.dropPart(p, "%s: reasoning without signature cannot be replayed to Bedrock; dropped", at)
					continue
				}
				if d := c.Reasoning.GetRedactedData(); d != "" && !canonicalBase64(d) {
					// redactedContent is a blob: other text would not reach the model as it was.
					l.dropPart(p, "%s: redacted reasoning is not canonical base64, which Bedrock's redactedContent blob needs; dropped", at)
					continue
				}
			case *compactorv1.Part_ToolCall, *compactorv1.Part_ToolResult:
				if m.GetRole() == compactorv1.Role_ROLE_ASSISTANT && p.GetToolResult() != nil {
					l.dropPart(p, "%s: provider-executed tool result has no Bedrock form; dropped", at)
					continue
				}
				if p.GetToolCall().GetProviderExecuted() {
					// A toolUse would need a toolResult Bedrock cannot be given.
					l.dropPart(p, "%s: provider-executed tool call has no Bedrock form; dropped", at)
					continue
				}
				if !tools {
					bp.asTxt = true
					if !toolsWarned {
						l.warn("%s: base_body has no toolConfig, which Bedrock requires for tool blocks; tool calls and results sent as text", at)
						toolsWarned = true
					}
				}
			default:
				l.dropNoForm(p, at, "Bedrock")
				continue
			}
			parts = append(parts, bp)
		}
		if c := l.bedrockCache(m.GetProviderOptions()); c != nil && len(parts) > lo && parts[len(parts)-1].cache == nil {
			parts[len(parts)-1].cache = c
		}
		if m.GetRole() == compactorv1.Role_ROLE_SYSTEM {
			sys = parts
			continue
		}
		all = parts
		if len(all) == lo {
			l.warn("messages[%d]: nothing left to send; message dropped", s.i)
			continue
		}
		role := "user"
		if m.GetRole() == compactorv1.Role_ROLE_ASSISTANT {
			role = "assistant"
		}
		if k := len(out); k > 0 && out[k-1].role == role {
			out[k-1].hi = len(all)
		} else {
			out = append(out, bmsg{role: role, lo: lo, hi: len(all)})
		}
	}
	if k := len(out); k > 0 && out[k-1].role == "assistant" {
		if b := &all[out[k-1].hi-1]; b.p.GetText() != nil {
			if t := trimRightSpace(b.text); t != b.text {
				l.warn("%s: trailing whitespace trimmed from the final assistant text", b.at)
				b.text = t
			}
		}
	}
	if len(sys) > 0 {
		w.key("system")
		w.arr()
		for k := range sys {
			w.obj()
			w.kstr("text", sys[k].text)
			w.endObj()
			l.cachePoint(sys[k].cache)
		}
		w.endArr()
	}
	w.key("messages")
	w.arr()
	for _, m := range out {
		w.obj()
		w.kstr("role", m.role)
		w.key("content")
		w.arr()
		for k := m.lo; k < m.hi; k++ {
			l.bedrockBlock(&all[k])
		}
		w.endArr()
		w.endObj()
	}
	w.endArr()
}

func (l *lowerer) cachePoint(c *structpb.Value) {
	if c == nil {
		return
	}
	w := &l.w
	w.obj()
	w.key("cachePoint")
	if c.GetStructValue() != nil {
		w.value(c)
	} else {
		w.obj()
		w.kstr("type", "default")
		w.endObj()
	}
	w.endObj()
}

// toolText writes a tool call or result as one string value, for requests without
// toolConfig: "[tool call NAME INPUT]", "[tool result NAME: OUTPUT]" or "[tool error NAME:
// OUTPUT]" (NAME the call id when the result has no tool name; the text parts of a content
// output joined by newlines). The pieces are escaped straight into the body, one after the
// other; every two of them meet at an ASCII literal, so that is the escaping of the whole
// text, and the text is never built.
func (w *jw) toolText(p *compactorv1.Part) {
	w.comma()
	b := w.b
	if c := p.GetToolCall(); c != nil {
		b = append(b, `"[tool call `...)
		b = append(appendEscaped(b, c.GetToolName()), ' ')
		b = appendEscaped(b, c.GetInputJson())
		w.b = append(b, `]"`...)
		return
	}
	r := p.GetToolResult()
	name := r.GetToolName()
	if name == "" {
		name = r.GetToolCallId()
	}
	if isErrorOutput(r.GetOutput()) {
		b = append(b, `"[tool error `...)
	} else {
		b = append(b, `"[tool result `...)
	}
	b = append(appendEscaped(b, name), ':', ' ')
	if c, ok := r.GetOutput().GetValue().(*compactorv1.ToolOutput_Content); ok {
		start := len(b)
		for _, p := range c.Content.GetParts() {
			if t, ok := textOf(p); ok {
				if len(b) > start { // as outputText: a newline after anything written
					b = append(b, `\n`...)
				}
				b = appendEscaped(b, t)
			}
		}
	} else {
		b = appendEscaped(b, outputText(r.GetOutput()))
	}
	w.b = append(b, `]"`...)
}

func (l *lowerer) bedrockImageOK(img *compactorv1.ImagePart, at loc) bool {
	u := img.GetUrl()
	switch {
	case u == "", strings.HasPrefix(u, "data:"), strings.HasPrefix(u, "s3://"):
		return true
	}
	l.warn("%s: Bedrock takes images inline or from S3, not by URL; dropped", at)
	return false
}

func (l *lowerer) bedrockFileOK(f *compactorv1.FilePart, at loc) bool {
	if docFormat(f.GetMediaType()) == "" {
		l.warn("%s: Bedrock documents are pdf, csv, doc, docx, xls, xlsx, html, txt or md, not %s; dropped", at, f.GetMediaType())
		return false
	}
	u := f.GetUrl()
	switch {
	case u == "", strings.HasPrefix(u, "data:"), strings.HasPrefix(u, "s3://"):
		return true
	}
	l.warn("%s: Bedrock takes documents inline or from S3, not by URL; dropped", at)
	return false
}

// bedrockSource writes {"bytes": ...} or {"s3Location": {"uri": ...}}.
func (l *lowerer) bedrockSource(data []byte, url string) {
	w := &l.w
	w.key("source")
	w.obj()
	if strings.HasPrefix(url, "s3://") {
		w.key("s3Location")
		w.obj()
		w.kstr("uri", url)
		w.endObj()
	} else {
		w.key("bytes")
		w.b64(data)
	}
	w.endObj()
}

func (l *lowerer) bedrockBlock(b *bpart) {
	w := &l.w
	p := b.p
	w.obj()
	if b.asTxt {
		w.key("text")
		w.toolText(p)
		w.endObj()
		for k, cp := range p.GetToolResult().GetOutput().GetContent().GetParts() {
			if cp.GetProvider() != nil {
				l.dropProviderPart(b.at.part(k), cp)
			}
		}
		l.cachePoint(b.cache)
		return
	}
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		w.kstr("text", b.text)
	case *compactorv1.Part_Image:
		l.bedrockImage(c.Image, b.at)
	case *compactorv1.Part_File:
		l.bedrockDoc(c.File, p.GetProviderOptions(), b.at)
	case *compactorv1.Part_Reasoning:
		w.key("reasoningContent")
		w.obj()
		if d := c.Reasoning.GetRedactedData(); d != "" {
			w.kstr("redactedContent", d)
		} else {
			w.key("reasoningText")
			w.obj()
			w.kstr("text", c.Reasoning.GetText())
			w.kstr("signature", c.Reasoning.GetSignature())
			w.endObj()
		}
		w.endObj()
	case *compactorv1.Part_ToolCall:
		w.key("toolUse")
		w.obj()
		w.kstr("toolUseId", c.ToolCall.GetToolCallId())
		w.kstr("name", c.ToolCall.GetToolName())
		w.key("input")
		l.inputObject(c.ToolCall.GetInputJson(), b.at)
		w.endObj()
	case *compactorv1.Part_ToolResult:
		r := c.ToolResult
		w.key("toolResult")
		w.obj()
		w.kstr("toolUseId", r.GetToolCallId())
		w.key("content")
		w.arr()
		o := r.GetOutput()
		switch v := o.GetValue().(type) {
		case *compactorv1.ToolOutput_Json:
			l.bedrockJSON(v.Json)
		case *compactorv1.ToolOutput_ErrorJson:
			l.bedrockJSON(v.ErrorJson)
		case *compactorv1.ToolOutput_Content:
			for k, cp := range v.Content.GetParts() {
				pat := b.at.part(k)
				switch pc := cp.GetContent().(type) {
				case *compactorv1.Part_Text:
					w.obj()
					w.kstr("text", pc.Text.GetText())
					w.endObj()
				case *compactorv1.Part_Image:
					if l.bedrockImageOK(pc.Image, pat) {
						w.obj()
						l.bedrockImage(pc.Image, pat)
						w.endObj()
					} else {
						l.markSkipped(cp)
					}
				case *compactorv1.Part_File:
					if l.bedrockFileOK(pc.File, pat) {
						w.obj()
						l.bedrockDoc(pc.File, cp.GetProviderOptions(), pat)
						w.endObj()
					} else {
						l.markSkipped(cp)
					}
				case *compactorv1.Part_Provider:
					l.dropProviderPart(pat, cp)
				}
			}
		default:
			w.obj()
			w.kstr("text", outputText(o))
			w.endObj()
		}
		w.endArr()
		if isErrorOutput(o) || l.richError(o, p.GetProviderOptions()) {
			w.kstr("status", "error")
		}
		w.endObj()
	}
	w.endObj()
	l.cachePoint(b.cache)
}

// bedrockJSON writes a {"json": value} block for JSON objects and arrays, a text block for
// anything else.
func (l *lowerer) bedrockJSON(s string) {
	w := &l.w
	w.obj()
	if t, ok := trimJSON(s); ok && (kindOf(t) == kindObject || kindOf(t) == kindArray) {
		w.kraw("json", t)
	} else {
		w.kstr("text", s)
	}
	w.endObj()
}

func (l *lowerer) bedrockImage(img *compactorv1.ImagePart, at loc) {
	w := &l.w
	data, url, media := l.inlineImage(img, at)
	f := imageFormat(media)
	if f == "" {
		l.warn("%s: image type %q is not one Bedrock takes; declared as png", at, media)
		f = "png"
	}
	w.key("image")
	w.obj()
	w.kstr("format", f)
	l.bedrockSource(data, url)
	w.endObj()
}

func (l *lowerer) bedrockDoc(f *compactorv1.FilePart, opts map[string]*structpb.Struct, at loc) {
	w := &l.w
	data, url, media := f.GetData(), f.GetUrl(), f.GetMediaType()
	if mt, d, ok := parseDataURL(url); ok {
		data, url = d, ""
		if docFormat(mt) != "" {
			media = mt
		}
	}
	w.key("document")
	w.obj()
	w.kstr("format", docFormat(media))
	w.kstr("name", docName(f.GetFilename(), 1))
	l.bedrockSource(data, url)
	l.writeCarried(opts, "bedrock", bedrockDocCarried)
	w.endObj()
}

// --- Lift ---

func (lt *lifter) bedrock(body string) error {
	if sys := field(body, "system"); sys != "" && sys != "null" {
		sp := lt.root.k("system")
		lt.from(sp)
		if err := want(sys, kindArray, sp); err != nil {
			return err
		}
		for i, b := range elems(sys) {
			bp := sp.i(i)
			if err := want(b, kindObject, bp); err != nil {
				return err
			}
			switch {
			case field(b, "text") != "":
				t, err := str(field(b, "text"), bp.k("text"), true)
				if err != nil {
					return err
				}
				lt.add(compactorv1.Role_ROLE_SYSTEM, []*compactorv1.Part{textPart(t)})
			case field(b, "cachePoint") != "":
				if n := len(lt.msgs); n > 0 {
					ps := lt.msgs[n-1].GetParts()
					setOpt(&ps[len(ps)-1].ProviderOptions, "bedrock", "cachePoint", toValue(field(b, "cachePoint")))
				} else {
					lt.warn(bp, "cache point before any system text; dropped")
				}
			default:
				return bp.invalid("unsupported system block: expected text or cachePoint")
			}
		}
	}
	return lt.eachMessage(body, lt.bedrockMessage)
}

func (lt *lifter) bedrockMessage(m string, p *jpath) error {
	assistant, content, err := lt.alternatingMessage(m, p)
	if err != nil {
		return err
	}
	cp := p.k("content")
	if err := want(content, kindArray, cp); err != nil {
		return err
	}
	split := lt.splitter(assistant)
	for i, b := range elems(content) {
		bp := cp.i(i)
		if err := want(b, kindObject, bp); err != nil {
			return err
		}
		if cpv := field(b, "cachePoint"); cpv != "" {
			if parts := split.parts; len(parts) > 0 {
				setOpt(&parts[len(parts)-1].ProviderOptions, "bedrock", "cachePoint", toValue(cpv))
			} else if n := len(lt.msgs); n > 0 && lt.msgs[n-1].GetRole() != compactorv1.Role_ROLE_SYSTEM {
				ps := lt.msgs[n-1].GetParts()
				setOpt(&ps[len(ps)-1].ProviderOptions, "bedrock", "cachePoint", toValue(cpv))
			} else {
				lt.warn(bp, "cache point before any content; dropped")
			}
			continue
		}
		part, err := lt.bedrockBlock(b, bp, assistant)
		if err != nil {
			return err
		}
		split.push(part)
	}
	if len(split.parts) == 0 {
		lt.warn(cp, "empty content; message skipped")
	}
	split.flush()
	return nil
}

func (lt *lifter) bedrockBlock(b string, p *jpath, assistant bool) (*compactorv1.Part, error) {
	switch {
	case field(b, "text") != "":
		t, err := str(field(b, "text"), p.k("text"), true)
		if err != nil {
			return nil, err
		}
		return textPart(t), nil
	case field(b, "image") != "":
		return bedrockImage(field(b, "image"), p.k("image"))
	case field(b, "document") != "":
		part, err := bedrockDoc(field(b, "document"), p.k("document"))
		if err == nil {
			carry(&part.ProviderOptions, field(b, "document"), "bedrock", bedrockDocCarried)
		}
		return part, err
	case field(b, "toolUse") != "":
		tp := p.k("toolUse")
		if !assistant {
			return nil, tp.invalid("toolUse belongs in an assistant message")
		}
		v := field(b, "toolUse")
		if err := want(v, kindObject, tp); err != nil {
			return nil, err
		}
		id, name, input, err := toolUse(v, tp, "toolUseId")
		if err != nil {
			return nil, err
		}
		lt.call(id, name)
		return callPart(id, name, input), nil
	case field(b, "toolResult") != "":
		tp := p.k("toolResult")
		if assistant {
			return nil, tp.invalid("toolResult belongs in a user message")
		}
		return lt.bedrockResult(field(b, "toolResult"), tp)
	case field(b, "reasoningContent") != "":
		rp := p.k("reasoningContent")
		if !assistant {
			return nil, rp.invalid("reasoningContent belongs in an assistant message")
		}
		v := field(b, "reasoningContent")
		if err := want(v, kindObject, rp); err != nil {
			return nil, err
		}
		r := &compactorv1.ReasoningPart{}
		if rt := field(v, "reasoningText"); rt != "" {
			if err := want(rt, kindObject, rp.k("reasoningText")); err != nil {
				return nil, err
			}
			var err error
			if r.Text, err = str(field(rt, "text"), rp.k("reasoningText").k("text"), false); err != nil {
				return nil, err
			}
			if r.Signature, err = str(field(rt, "signature"), rp.k("reasoningText").k("signature"), false); err != nil {
				return nil, err
			}
		} else {
			var err error
			if r.RedactedData, err = str(field(v, "redactedContent"), rp.k("redactedContent"), true); err != nil {
				return nil, err
			}
		}
		return &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: r}}, nil
	}
	return nil, p.invalid("unsupported content block: expected text, image, document, toolUse, toolResult, reasoningContent or cachePoint")
}

func bedrockSource(v string, p *jpath) (data []byte, url string, err error) {
	sp := p.k("source")
	src := field(v, "source")
	if err := want(src, kindObject, sp); err != nil {
		return nil, "", err
	}
	if s3 := field(src, "s3Location"); s3 != "" {
		u, err := str(field(s3, "uri"), sp.k("s3Location").k("uri"), true)
		return nil, u, err
	}
	if t := field(src, "text"); t != "" {
		s, err := str(t, sp.k("text"), true)
		return []byte(s), "", err
	}
	data, err = b64(field(src, "bytes"), sp.k("bytes"))
	return data, "", err
}

func bedrockImage(v string, p *jpath) (*compactorv1.Part, error) {
	if err := want(v, kindObject, p); err != nil {
		return nil, err
	}
	f, err := str(field(v, "format"), p.k("format"), true)
	if err != nil {
		return nil, err
	}
	data, url, err := bedrockSource(v, p)
	if err != nil {
		return nil, err
	}
	media := "image/" + f
	if url != "" {
		return imageURL(url, media), nil
	}
	return imageData(data, media), nil
}

func bedrockDoc(v string, p *jpath) (*compactorv1.Part, error) {
	if err := want(v, kindObject, p); err != nil {
		return nil, err
	}
	f, err := str(field(v, "format"), p.k("format"), false)
	if err != nil {
		return nil, err
	}
	name, err := str(field(v, "name"), p.k("name"), false)
	if err != nil {
		return nil, err
	}
	media, ok := extMedia[f]
	if !ok {
		return nil, p.k("format").invalid(`unsupported document format "` + f + `"`)
	}
	data, url, err := bedrockSource(v, p)
	if err != nil {
		return nil, err
	}
	if url != "" {
		return fileURL(url, media, name), nil
	}
	return fileData(data, media, name), nil
}

func (lt *lifter) bedrockResult(v string, p *jpath) (*compactorv1.Part, error) {
	if err := want(v, kindObject, p); err != nil {
		return nil, err
	}
	id, err := str(field(v, "toolUseId"), p.k("toolUseId"), true)
	if err != nil {
		return nil, err
	}
	status, err := str(field(v, "status"), p.k("status"), false)
	if err != nil {
		return nil, err
	}
	isErr := status == "error"
	cp := p.k("content")
	content := field(v, "content")
	var parts []*compactorv1.Part
	var jsonRaw string
	switch kindOf(content) {
	case kindNull, kindInvalid:
	case kindArray:
		for i, b := range elems(content) {
			bp := cp.i(i)
			if err := want(b, kindObject, bp); err != nil {
				return nil, err
			}
			if j := field(b, "json"); j != "" {
				jsonRaw = j
				parts = append(parts, textPart(j))
				continue
			}
			part, err := lt.bedrockBlock(b, bp, false)
			if err != nil {
				return nil, err
			}
			switch part.GetContent().(type) {
			case *compactorv1.Part_Text, *compactorv1.Part_Image, *compactorv1.Part_File:
			default:
				return nil, bp.invalid("tool result content holds only text, json, image and document blocks")
			}
			parts = append(parts, part)
		}
	default:
		return nil, want(content, kindArray, cp)
	}
	var out *compactorv1.ToolOutput
	switch {
	case len(parts) == 0:
		out = textOut("")
	case len(parts) == 1 && jsonRaw != "":
		out = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Json{Json: jsonRaw}}
		if isErr {
			out = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorJson{ErrorJson: jsonRaw}}
		}
	case len(parts) == 1 && parts[0].GetText() != nil:
		out = textOut(parts[0].GetText().GetText())
		if isErr {
			out = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorText{ErrorText: parts[0].GetText().GetText()}}
		}
	default:
		out = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: parts}}}
		if isErr { // the IR's error outputs are text or JSON: the status travels as an option
			part := resultPart(id, lt.names[id], out)
			setOpt(&part.ProviderOptions, "bedrock", "status", structpb.NewStringValue(status))
			return part, nil
		}
	}
	return resultPart(id, lt.names[id], out), nil
}

// canonicalBase64 reports whether s is standard padded base64 that re-encodes to itself.
func canonicalBase64(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && base64.StdEncoding.EncodeToString(b) == s
}
