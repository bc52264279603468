package format

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// anthropicFields are the conversation fields of an Anthropic Messages body.
var anthropicFields = []string{"system", "messages"}

// maxCacheBreakpoints is how many cache_control markers Anthropic accepts per request.
const maxCacheBreakpoints = 4

// Anthropic block kinds.
const (
	abText uint8 = iota
	abImage
	abFile
	abThinking
	abRedacted
	abToolUse
	abToolResult
	abServerResult
	abRaw // an Anthropic ProviderPart, written as it came
)

// ablock is one content block to write.
type ablock struct {
	kind  uint8
	p     *compactorv1.Part
	text  string // text blocks: the text to send
	cache *structpb.Value
	at    loc
}

// amsg is one Anthropic message: consecutive IR messages of the same API role, merged.
type amsg struct {
	role   string
	lo, hi int // the message's blocks are all[lo:hi]
}

func (l *lowerer) anthropic() {
	inline := l.req.GetInlineDynamicSystem()
	var sys []ablock
	var out []amsg
	n := 0
	for _, s := range l.msgs {
		n += len(s.m.GetParts())
	}
	all := make([]ablock, 0, n) // one backing array for every message's blocks
	for _, s := range l.msgs {
		m := s.m
		if m.GetRole() == compactorv1.Role_ROLE_SYSTEM {
			if !inline || m.GetLifecycle() != compactorv1.Lifecycle_LIFECYCLE_DYNAMIC {
				sys = l.anthropicBlocks(sys, s.i, m)
				continue
			}
			m = systemContext(m)
		}
		role := "user"
		if m.GetRole() == compactorv1.Role_ROLE_ASSISTANT {
			role = "assistant"
		}
		lo := len(all)
		all = l.anthropicBlocks(all, s.i, m)
		if len(all) == lo {
			l.warn("messages[%d]: nothing left to send; message dropped", s.i)
			continue
		}
		if k := len(out); k > 0 && out[k-1].role == role {
			out[k-1].hi = len(all)
		} else {
			out = append(out, amsg{role: role, lo: lo, hi: len(all)})
		}
	}
	// A final assistant message (prefill) must not end with whitespace.
	if k := len(out); k > 0 && out[k-1].role == "assistant" {
		if b := &all[out[k-1].hi-1]; b.kind == abText {
			if t := trimRightSpace(b.text); t != b.text {
				l.warn("%s: trailing whitespace trimmed from the final assistant text", b.at)
				b.text = t
			}
		}
	}
	// At most four cache breakpoints, tools first (anthropicToolCache counted them), then
	// system, in document order.
	count := min(l.toolCaches, maxCacheBreakpoints)
	limit := func(b *ablock) {
		if b.cache == nil {
			return
		}
		if count++; count > maxCacheBreakpoints {
			l.warn("%s: cache breakpoint dropped: Anthropic allows at most %d", b.at, maxCacheBreakpoints)
			b.cache = nil
		}
	}
	cached := false
	for k := range sys {
		limit(&sys[k])
		cached = cached || sys[k].cache != nil
	}
	for k := range all {
		l.limitNestedCache(&all[k], &count)
		limit(&all[k])
	}

	w := &l.w
	if len(sys) > 0 {
		w.key("system")
		if cached {
			w.arr()
			for k := range sys {
				l.anthropicBlock(&sys[k])
			}
			w.endArr()
		} else {
			w.comma()
			w.b = append(w.b, '"')
			for k := range sys {
				if k > 0 {
					w.b = append(w.b, `\n\n`...)
				}
				w.b = appendEscaped(w.b, sys[k].text)
			}
			w.b = append(w.b, '"')
		}
	}
	w.key("messages")
	w.arr()
	for k := range out {
		w.obj()
		w.kstr("role", out[k].role)
		w.key("content")
		w.arr()
		for j := out[k].lo; j < out[k].hi; j++ {
			l.anthropicBlock(&all[j])
		}
		w.endArr()
		w.endObj()
	}
	w.endArr()
}

// anthropicCache returns the cache_control an options map asks for, or nil: Anthropic's own,
// else a Bedrock cachePoint mapped to an ephemeral breakpoint.
func (l *lowerer) anthropicCache(o map[string]*structpb.Struct) *structpb.Value {
	v := l.opt(o, "anthropic", "cacheControl", "cache_control")
	if l.opt(o, "bedrock", "cachePoint", "cache_point") != nil && v == nil { // the same breakpoint
		return ephemeralCache
	}
	return v
}

// ephemeralCache is {"type":"ephemeral"}.
var ephemeralCache = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("ephemeral")}})

// anthropicBlocks appends one message's parts as blocks to blocks, dropping (with a warning)
// what Anthropic cannot take.
func (l *lowerer) anthropicBlocks(blocks []ablock, i int, m *compactorv1.Message) []ablock {
	lo := len(blocks)
	for j, p := range m.GetParts() {
		at := where(i, j)
		if pp := p.GetProvider(); pp != nil {
			if pp.GetProvider() != engine.ProviderAnthropic {
				l.dropProviderPart(at, p)
				continue
			}
			blocks = append(blocks, ablock{kind: abRaw, p: p, at: at})
			continue
		}
		b := ablock{p: p, at: at, cache: l.anthropicCache(p.GetProviderOptions())}
		switch c := p.GetContent().(type) {
		case *compactorv1.Part_Text:
			if isBlank(c.Text.GetText()) {
				l.dropBlankText(p, at, "Anthropic")
				continue
			}
			b.kind, b.text = abText, c.Text.GetText()
		case *compactorv1.Part_Image, *compactorv1.Part_File:
			if m.GetRole() == compactorv1.Role_ROLE_ASSISTANT {
				l.dropPart(p, "%s: Anthropic takes images and documents in user messages only; dropped", at)
				continue
			}
			b.kind = abImage
			if f := p.GetFile(); f != nil {
				if !l.anthropicFileOK(f, at) {
					l.markSkipped(p)
					continue
				}
				b.kind = abFile
			}
		case *compactorv1.Part_Reasoning:
			switch r := c.Reasoning; {
			case r.GetRedactedData() != "":
				b.kind = abRedacted
			case r.GetSignature() != "":
				b.kind = abThinking
			default:
				l.dropPart(p, "%s: reasoning without signature cannot be replayed to Anthropic; dropped", at)
				continue
			}
		case *compactorv1.Part_ToolCall:
			b.kind = abToolUse
		case *compactorv1.Part_ToolResult:
			b.kind = abToolResult
			if m.GetRole() == compactorv1.Role_ROLE_ASSISTANT {
				b.kind = abServerResult
			}
		default:
			l.dropNoForm(p, at, "Anthropic")
			continue
		}
		blocks = append(blocks, b)
	}
	if c := l.anthropicCache(m.GetProviderOptions()); c != nil && len(blocks) > lo && blocks[len(blocks)-1].cache == nil {
		blocks[len(blocks)-1].cache = c
	}
	return blocks
}

// anthropicFileOK reports whether Anthropic takes the file (PDF, or plain text inline).
func (l *lowerer) anthropicFileOK(f *compactorv1.FilePart, at loc) bool {
	mt := strings.ToLower(f.GetMediaType())
	switch {
	case mt == "application/pdf":
		return true
	case strings.HasPrefix(mt, "text/plain") && f.GetUrl() == "":
		return true
	}
	l.warn("%s: Anthropic takes PDF and inline text/plain documents only, not %s; dropped", at, f.GetMediaType())
	return false
}

func partKind(p *compactorv1.Part) string {
	switch p.GetContent().(type) {
	case *compactorv1.Part_ApprovalRequest:
		return "a tool approval request"
	case *compactorv1.Part_ApprovalResponse:
		return "a tool approval response"
	case *compactorv1.Part_Reasoning:
		return "reasoning"
	case *compactorv1.Part_Image:
		return "an image"
	case *compactorv1.Part_File:
		return "a file"
	case *compactorv1.Part_ToolCall:
		return "a tool call"
	case *compactorv1.Part_ToolResult:
		return "a tool result"
	}
	return "this part"
}

func (l *lowerer) anthropicBlock(b *ablock) {
	w := &l.w
	if b.kind == abRaw {
		w.raw(b.p.GetProvider().GetJson())
		return
	}
	o := b.p.GetProviderOptions()
	w.obj()
	switch b.kind {
	case abText:
		w.kstr("type", "text")
		w.kstr("text", b.text)
		l.writeCarried(o, "anthropic", anthropicTextCarried)
	case abImage:
		w.kstr("type", "image")
		l.anthropicImageSource(b.p.GetImage(), b.at)
		l.writeCarried(o, "anthropic", anthropicImageCarried)
	case abFile:
		w.kstr("type", "document")
		l.anthropicDocSource(b.p.GetFile(), b.at)
		if n := b.p.GetFile().GetFilename(); n != "" {
			w.kstr("title", n)
		}
		l.writeCarried(o, "anthropic", anthropicDocCarried)
	case abThinking:
		r := b.p.GetReasoning()
		w.kstr("type", "thinking")
		w.kstr("thinking", r.GetText())
		w.kstr("signature", r.GetSignature())
	case abRedacted:
		w.kstr("type", "redacted_thinking")
		w.kstr("data", b.p.GetReasoning().GetRedactedData())
	case abToolUse:
		c := b.p.GetToolCall()
		if c.GetProviderExecuted() {
			w.kstr("type", "server_tool_use")
		} else {
			w.kstr("type", "tool_use")
		}
		w.kstr("id", c.GetToolCallId())
		w.kstr("name", c.GetToolName())
		w.key("input")
		l.inputObject(c.GetInputJson(), b.at)
		if c.GetProviderExecuted() {
			l.writeCarried(o, "anthropic", anthropicServerCarried)
		} else {
			l.writeCarried(o, "anthropic", anthropicToolUseCarried)
		}
	case abToolResult:
		r := b.p.GetToolResult()
		w.kstr("type", "tool_result")
		w.kstr("tool_use_id", r.GetToolCallId())
		l.anthropicResultContent(r.GetOutput(), b.at)
		if l.richError(r.GetOutput(), o) {
			w.key("is_error")
			w.boolean(true)
		}
		l.writeCarried(o, "anthropic", anthropicResultCarried)
	case abServerResult:
		r := b.p.GetToolResult()
		typ := l.optString(o, "anthropic", "type")
		if typ == "" {
			typ = "web_search_tool_result"
		}
		w.kstr("type", typ)
		w.kstr("tool_use_id", r.GetToolCallId())
		w.key("content")
		out := r.GetOutput()
		raw := out.GetJson()
		if raw == "" {
			raw = out.GetErrorJson()
		}
		if t, ok := trimJSON(raw); ok {
			w.raw(t)
		} else {
			w.str(outputText(r.GetOutput()))
		}
		l.writeCarried(o, "anthropic", anthropicServerCarried)
	}
	if b.cache != nil {
		w.key("cache_control")
		w.value(b.cache)
	}
	w.endObj()
}

// outputText renders any tool output as one string (content outputs: their texts joined).
func outputText(o *compactorv1.ToolOutput) string {
	switch v := o.GetValue().(type) {
	case *compactorv1.ToolOutput_Text:
		return v.Text
	case *compactorv1.ToolOutput_Json:
		return v.Json
	case *compactorv1.ToolOutput_ErrorText:
		return v.ErrorText
	case *compactorv1.ToolOutput_ErrorJson:
		return v.ErrorJson
	case *compactorv1.ToolOutput_Denied:
		return v.Denied
	case *compactorv1.ToolOutput_Content:
		var b strings.Builder
		for _, p := range v.Content.GetParts() {
			if t, ok := textOf(p); ok {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(t)
			}
		}
		return b.String()
	}
	return ""
}

func isErrorOutput(o *compactorv1.ToolOutput) bool {
	switch o.GetValue().(type) {
	case *compactorv1.ToolOutput_ErrorText, *compactorv1.ToolOutput_ErrorJson:
		return true
	}
	return false
}

func (l *lowerer) anthropicResultContent(o *compactorv1.ToolOutput, at loc) {
	w := &l.w
	w.key("content")
	c, ok := o.GetValue().(*compactorv1.ToolOutput_Content)
	if !ok {
		w.str(outputText(o))
		if isErrorOutput(o) {
			w.key("is_error")
			w.boolean(true)
		}
		return
	}
	w.arr()
	for k, p := range c.Content.GetParts() {
		pat := at.part(k)
		o := p.GetProviderOptions()
		switch pc := p.GetContent().(type) {
		case *compactorv1.Part_Provider:
			if providerPartOf(p, engine.ProviderAnthropic) == nil {
				l.dropProviderPart(pat, p)
				continue
			}
			w.raw(pc.Provider.GetJson())
			continue
		case *compactorv1.Part_Text:
			w.obj()
			w.kstr("type", "text")
			w.kstr("text", pc.Text.GetText())
			l.writeCarried(o, "anthropic", anthropicTextCarried)
		case *compactorv1.Part_Image:
			w.obj()
			w.kstr("type", "image")
			l.anthropicImageSource(pc.Image, pat)
			l.writeCarried(o, "anthropic", anthropicImageCarried)
		case *compactorv1.Part_File:
			if !l.anthropicFileOK(pc.File, pat) {
				l.markSkipped(p)
				continue
			}
			w.obj()
			w.kstr("type", "document")
			l.anthropicDocSource(pc.File, pat)
			if n := pc.File.GetFilename(); n != "" {
				w.kstr("title", n)
			}
			l.writeCarried(o, "anthropic", anthropicDocCarried)
		default:
			continue
		}
		if cc := l.anthropicCache(o); cc != nil && !l.uncached[p] {
			w.key("cache_control")
			w.value(cc)
		}
		w.endObj()
	}
	w.endArr()
}

// limitNestedCache counts, with count, the cache breakpoints on the content parts of b's tool
// result against the four Anthropic accepts, dropping (warned) those past them.
func (l *lowerer) limitNestedCache(b *ablock, count *int) {
	if b.kind != abToolResult {
		return
	}
	for k, p := range b.p.GetToolResult().GetOutput().GetContent().GetParts() {
		if p.GetProvider() != nil || l.anthropicCache(p.GetProviderOptions()) == nil {
			continue
		}
		if *count++; *count > maxCacheBreakpoints {
			l.warn("%s: cache breakpoint dropped: Anthropic allows at most %d", b.at.part(k), maxCacheBreakpoints)
			if l.uncached == nil {
				l.uncached = map[*compactorv1.Part]bool{}
			}
			l.uncached[p] = true
		}
	}
}

func (l *lowerer) anthropicImageSource(img *compactorv1.ImagePart, at loc) {
	w := &l.w
	w.key("source")
	w.obj()
	data, url, media := l.inlineImage(img, at)
	if url != "" {
		w.kstr("type", "url")
		w.kstr("url", url)
		w.endObj()
		return
	}
	w.kstr("type", "base64")
	w.kstr("media_type", media)
	w.key("data")
	w.b64(data)
	w.endObj()
}

func (l *lowerer) anthropicDocSource(f *compactorv1.FilePart, at loc) {
	w := &l.w
	w.key("source")
	w.obj()
	switch {
	case f.GetUrl() != "":
		if m, d, ok := parseDataURL(f.GetUrl()); ok {
			w.kstr("type", "base64")
			w.kstr("media_type", m)
			w.key("data")
			w.b64(d)
		} else {
			w.kstr("type", "url")
			w.kstr("url", f.GetUrl())
		}
	case strings.HasPrefix(strings.ToLower(f.GetMediaType()), "text/plain"):
		if !utf8.Valid(f.GetData()) {
			l.warn("%s: text/plain document is not valid UTF-8; invalid bytes sent as U+FFFD", at)
		}
		w.kstr("type", "text")
		w.kstr("media_type", "text/plain")
		w.key("data")
		w.comma()
		w.b = appendString(w.b, string(f.GetData()))
	default:
		w.kstr("type", "base64")
		w.kstr("media_type", f.GetMediaType())
		w.key("data")
		w.b64(f.GetData())
	}
	w.endObj()
}

// --- Lift ---

func (lt *lifter) anthropic(body string) error {
	if sys := field(body, "system"); sys != "" {
		if err := lt.anthropicSystem(sys, lt.root.k("system")); err != nil {
			return err
		}
	}
	return lt.eachMessage(body, lt.anthropicMessage)
}

func (lt *lifter) anthropicSystem(sys string, p *jpath) error {
	lt.from(p)
	switch kindOf(sys) {
	case kindNull:
		return nil
	case kindString:
		if t := unquote(sys); t != "" {
			lt.add(compactorv1.Role_ROLE_SYSTEM, []*compactorv1.Part{textPart(t)})
		}
		return nil
	case kindArray:
		for i, b := range elems(sys) {
			bp := p.i(i)
			if err := want(b, kindObject, bp); err != nil {
				return err
			}
			if typ := sval(field(b, "type")); typ != "text" {
				return bp.k("type").invalid(`system blocks must have type "text"`)
			}
			t, err := str(field(b, "text"), bp.k("text"), true)
			if err != nil {
				return err
			}
			part := textPart(t)
			if cc := field(b, "cache_control"); cc != "" && cc != "null" {
				part.ProviderOptions = opts("anthropic", "cacheControl", cc)
			}
			lt.unknownKeys(b, bp, "type", "text", "cache_control")
			lt.add(compactorv1.Role_ROLE_SYSTEM, []*compactorv1.Part{part})
		}
		return nil
	}
	return p.invalid("must be a string or an array of text blocks, not " + kindName(kindOf(sys)))
}

func (lt *lifter) anthropicMessage(m string, p *jpath) error {
	assistant, content, err := lt.alternatingMessage(m, p)
	if err != nil {
		return err
	}
	cp := p.k("content")
	switch kindOf(content) {
	case kindString:
		r := compactorv1.Role_ROLE_USER
		if assistant {
			r = compactorv1.Role_ROLE_ASSISTANT
		}
		lt.add(r, []*compactorv1.Part{textPart(unquote(content))})
		return nil
	case kindArray:
	default:
		return want(content, kindArray, cp)
	}
	split := lt.splitter(assistant)
	n := 0
	for i, b := range elems(content) {
		n++
		bp := cp.i(i)
		part, err := lt.anthropicBlock(b, bp, assistant)
		if err != nil {
			return err
		}
		if part.GetProvider().GetType() == "compaction" {
			split.alone(part)
			continue
		}
		split.push(part)
	}
	if n == 0 {
		lt.warn(cp, "empty content; message skipped")
	}
	split.flush()
	return nil
}

func (lt *lifter) anthropicBlock(b string, p *jpath, assistant bool) (*compactorv1.Part, error) {
	if err := want(b, kindObject, p); err != nil {
		return nil, err
	}
	tp := p.k("type")
	typ, err := str(field(b, "type"), tp, true)
	if err != nil {
		return nil, err
	}
	var part *compactorv1.Part
	known := []string{"type", "cache_control"}
	var carried []string
	userOnly, assistantOnly := false, false
	switch typ {
	case "text":
		t, err := str(field(b, "text"), p.k("text"), true)
		if err != nil {
			return nil, err
		}
		part = textPart(t)
		known, carried = append(known, "text"), anthropicTextCarried
	case "image":
		part, err = anthropicImage(field(b, "source"), p.k("source"))
		known, carried = append(known, "source"), anthropicImageCarried
	case "document":
		part, err = anthropicDocument(b, p)
		known, carried = append(known, "source", "title"), anthropicDocCarried
	case "tool_result":
		userOnly = true
		part, err = lt.anthropicResult(b, p)
		known, carried = append(known, "tool_use_id", "content", "is_error"), anthropicResultCarried
	case "tool_use", "server_tool_use":
		assistantOnly = true
		id, name, input, err := toolUse(b, p, "id")
		if err != nil {
			return nil, err
		}
		part = callPart(id, name, input)
		part.GetToolCall().ProviderExecuted = typ == "server_tool_use"
		lt.call(id, name)
		known, carried = append(known, "id", "name", "input"), anthropicToolUseCarried
		if typ == "server_tool_use" {
			carried = anthropicServerCarried
		}
	case "compaction", "search_result", "container_upload", "mcp_tool_use", "mcp_tool_result":
		// State the IR does not model, kept whole for Anthropic (a compaction is a summary
		// boundary; see engine.ProviderCompaction).
		return opaquePart(engine.ProviderAnthropic, typ, b), nil
	case "thinking":
		assistantOnly = true
		t, err := str(field(b, "thinking"), p.k("thinking"), false)
		if err != nil {
			return nil, err
		}
		sig, err := str(field(b, "signature"), p.k("signature"), false)
		if err != nil {
			return nil, err
		}
		part = &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: t, Signature: sig}}}
		known = append(known, "thinking", "signature")
	case "redacted_thinking":
		assistantOnly = true
		d, err := str(field(b, "data"), p.k("data"), true)
		if err != nil {
			return nil, err
		}
		part = &compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{RedactedData: d}}}
		known = append(known, "data")
	default:
		if !strings.HasSuffix(typ, "_tool_result") || !assistant {
			return nil, tp.invalid(`unsupported content block type "` + typ + `"`)
		}
		// A provider-executed tool's result (web_search_tool_result, ...).
		id, err := str(field(b, "tool_use_id"), p.k("tool_use_id"), true)
		if err != nil {
			return nil, err
		}
		content := field(b, "content")
		if content == "" {
			content = "null"
		}
		part = resultPart(id, lt.names[id], &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Json{Json: content}})
		setOpt(&part.ProviderOptions, "anthropic", "type", structpb.NewStringValue(typ))
		known, carried = append(known, "tool_use_id", "content"), anthropicServerCarried
	}
	if err != nil {
		return nil, err
	}
	if userOnly && assistant {
		return nil, tp.invalid(`a "` + typ + `" block belongs in a user message`)
	}
	if assistantOnly && !assistant {
		return nil, tp.invalid(`a "` + typ + `" block belongs in an assistant message`)
	}
	if cc := field(b, "cache_control"); cc != "" && cc != "null" {
		setOpt(&part.ProviderOptions, "anthropic", "cacheControl", toValue(cc))
	}
	lt.unknownKeysC(b, p, &part.ProviderOptions, "anthropic", carried, known...)
	return part, nil
}

func anthropicImage(src string, p *jpath) (*compactorv1.Part, error) {
	if err := want(src, kindObject, p); err != nil {
		return nil, err
	}
	typ, err := str(field(src, "type"), p.k("type"), true)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "base64":
		media, err := str(field(src, "media_type"), p.k("media_type"), false)
		if err != nil {
			return nil, err
		}
		data, err := b64(field(src, "data"), p.k("data"))
		if err != nil {
			return nil, err
		}
		return imageData(data, media), nil
	case "url":
		u, err := str(field(src, "url"), p.k("url"), true)
		if err != nil {
			return nil, err
		}
		return imageURL(u, ""), nil
	}
	return nil, p.k("type").invalid(`unsupported image source type "` + typ + `"`)
}

func anthropicDocument(b string, p *jpath) (*compactorv1.Part, error) {
	title, err := str(field(b, "title"), p.k("title"), false)
	if err != nil {
		return nil, err
	}
	sp := p.k("source")
	src := field(b, "source")
	if err := want(src, kindObject, sp); err != nil {
		return nil, err
	}
	typ, err := str(field(src, "type"), sp.k("type"), true)
	if err != nil {
		return nil, err
	}
	media, err := str(field(src, "media_type"), sp.k("media_type"), false)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "base64":
		data, err := b64(field(src, "data"), sp.k("data"))
		if err != nil {
			return nil, err
		}
		if media == "" {
			media = "application/pdf"
		}
		return fileData(data, media, title), nil
	case "text":
		t, err := str(field(src, "data"), sp.k("data"), true)
		if err != nil {
			return nil, err
		}
		return fileData([]byte(t), "text/plain", title), nil
	case "url":
		u, err := str(field(src, "url"), sp.k("url"), true)
		if err != nil {
			return nil, err
		}
		return fileURL(u, "application/pdf", title), nil
	}
	return nil, sp.k("type").invalid(`unsupported document source type "` + typ + `"`)
}

func (lt *lifter) anthropicResult(b string, p *jpath) (*compactorv1.Part, error) {
	id, err := str(field(b, "tool_use_id"), p.k("tool_use_id"), true)
	if err != nil {
		return nil, err
	}
	isErr := field(b, "is_error") == "true"
	cp := p.k("content")
	content := field(b, "content")
	var out *compactorv1.ToolOutput
	switch kindOf(content) {
	case kindInvalid, kindNull:
		out = textOut("")
	case kindString:
		out = textOut(unquote(content))
	case kindArray:
		var parts []*compactorv1.Part
		allText := true // and without options: an error of such texts is an error text
		for i, e := range elems(content) {
			var part *compactorv1.Part
			if typ := sval(field(e, "type")); isOneOf(typ, anthropicResultOpaque) && kindOf(e) == kindObject {
				part = opaquePart(engine.ProviderAnthropic, typ, e)
			} else if part, err = lt.anthropicBlock(e, cp.i(i), false); err != nil {
				return nil, err
			}
			switch part.GetContent().(type) {
			case *compactorv1.Part_Text:
				allText = allText && len(part.GetProviderOptions()) == 0
			case *compactorv1.Part_Image, *compactorv1.Part_File:
				allText = false
			case *compactorv1.Part_Provider:
				if !isOneOf(part.GetProvider().GetType(), anthropicResultOpaque) {
					return nil, cp.i(i).k("type").invalid(anthropicResultBlocks)
				}
				allText = false
			default:
				return nil, cp.i(i).k("type").invalid(anthropicResultBlocks)
			}
			parts = append(parts, part)
		}
		switch {
		case len(parts) == 0:
			out = textOut("")
		case isErr && allText:
			out = textOut(outputText(&compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: parts}}}))
		default:
			out = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Content{Content: &compactorv1.ToolContent{Parts: parts}}}
			if isErr { // the IR's error outputs are text or JSON: the flag travels as an option
				part := resultPart(id, lt.names[id], out)
				setOpt(&part.ProviderOptions, "anthropic", optIsError, structpb.NewBoolValue(true))
				return part, nil
			}
		}
	default:
		return nil, cp.invalid("must be a string or an array of blocks, not " + kindName(kindOf(content)))
	}
	if isErr {
		if t, ok := out.GetValue().(*compactorv1.ToolOutput_Text); ok {
			out = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorText{ErrorText: t.Text}}
		}
	}
	return resultPart(id, lt.names[id], out), nil
}
