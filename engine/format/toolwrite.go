package format

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// Writing tool definitions and tool choices in a target's form (the rules are on
// LowerRequest.tools and docs/PROVIDERS.md).

// toolLoc names a request tool in warnings: tools[i].
type toolLoc int

func (t toolLoc) String() string { return "tools[" + itoa(int(t)) + "]" }

// validateTools checks the request's tools and tool choice: every tool is named, a schema
// is a JSON object, a provider tool names a known format, a type and a JSON object, and a
// choice of one tool names it.
func validateTools(tools []*compactorv1.Tool, c *compactorv1.ToolChoice) error {
	var v []engine.FieldViolation
	bad := func(field, desc string) { v = append(v, engine.FieldViolation{Field: field, Description: desc}) }
	object := func(field, raw string) {
		if err := validateJSON(raw, &jpath{key: field}); err != nil {
			bad(field, "must be a JSON object: "+engineDescription(err))
		} else if kindOf(strings.TrimSpace(raw)) != kindObject {
			bad(field, "must be a JSON object, not "+kindName(kindOf(strings.TrimSpace(raw))))
		}
	}
	for i, t := range tools {
		at := "tools[" + itoa(i) + "]"
		if t.GetName() == "" {
			bad(at+".name", "required: the name the model calls the tool by")
		}
		if s := t.GetInputSchemaJson(); s != "" {
			object(at+".input_schema_json", s)
		}
		if pt := t.GetProviderTool(); pt != nil {
			if ProviderName(pt.GetFormat()) == "provider "+itoa(int(pt.GetFormat())) {
				bad(at+".provider_tool.format", "required: the format the tool was read from")
			}
			if pt.GetType() == "" {
				bad(at+".provider_tool.type", "required: the tool's kind")
			}
			object(at+".provider_tool.json", pt.GetJson())
		}
	}
	switch c.GetMode() {
	case compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_UNSPECIFIED, compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO,
		compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE, compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
	case compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL:
		if c.GetToolName() == "" {
			bad("tool_choice.tool_name", "required with TOOL_CHOICE_MODE_TOOL")
		}
	default:
		bad("tool_choice.mode", "unknown mode "+itoa(int(c.GetMode())))
	}
	if len(v) > 0 {
		return &engine.ValidationError{Violations: v}
	}
	return nil
}

// engineDescription is the description of a ValidationError's first violation.
func engineDescription(err error) string {
	if ve, ok := err.(*engine.ValidationError); ok && len(ve.Violations) > 0 {
		return ve.Violations[0].Description
	}
	return err.Error()
}

// writeTool writes tool t as an element of the target's tool list (for Gemini, a function
// declaration), or names it in a warning when the target cannot take it. For Bedrock a tool
// may be followed by a cachePoint element.
func (l *lowerer) writeTool(w *jw, t *compactorv1.Tool, at toolLoc) {
	to := l.req.GetProvider()
	if pt := t.GetProviderTool(); pt != nil {
		if pt.GetFormat() == to {
			w.raw(strings.TrimSpace(pt.GetJson()))
		} else {
			l.drop(at, "provider_tool."+ProviderName(pt.GetFormat())+"."+pt.GetType())
		}
		return
	}
	w.obj()
	switch to {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		l.toolHead(w, t)
		w.key("input_schema")
		l.schema(w, t, true)
		l.toolStrict(w, t, at)
		l.toolOptions(w, t, at, "anthropic", anthropicToolCarried)
		if c := l.anthropicToolCache(t, at); c != nil {
			w.key("cache_control")
			w.value(c)
		}
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		w.kstr("type", "function")
		w.key("function")
		w.obj()
		l.toolHead(w, t)
		if t.GetInputSchemaJson() != "" {
			w.key("parameters")
			l.schema(w, t, false)
		}
		l.toolStrict(w, t, at)
		l.toolOptions(w, t, at, "openai", chatToolCarried)
		w.endObj()
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		w.kstr("type", "function")
		l.toolHead(w, t)
		w.key("parameters") // required, as strict is
		l.schema(w, t, true)
		w.key("strict")
		w.boolean(t.GetStrict()) // the other formats' default when unsaid; Responses' is true
		l.toolOptions(w, t, at, "openai", responsesToolCarried)
	case compactorv1.Provider_PROVIDER_GEMINI:
		l.toolHead(w, t)
		if t.GetInputSchemaJson() != "" {
			if openAPI(t) {
				w.key("parameters")
			} else {
				w.key("parametersJsonSchema")
			}
			l.schema(w, t, false)
		}
		l.toolStrict(w, t, at)
		l.toolOptions(w, t, at, "google", geminiDeclCarried)
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		w.key("toolSpec")
		w.obj()
		l.toolHead(w, t)
		w.key("inputSchema")
		w.obj()
		w.key("json")
		l.schema(w, t, true)
		w.endObj()
		l.toolStrict(w, t, at)
		l.toolOptions(w, t, at, "bedrock", bedrockToolCarried)
		w.endObj()
		if c := bedrockToolCache(t); c != nil { // a cachePoint element of its own
			w.endObj()
			w.obj()
			w.key("cachePoint")
			w.value(c)
		}
	}
	w.endObj()
}

// toolHead writes a function tool's name and description.
func (l *lowerer) toolHead(w *jw, t *compactorv1.Tool) {
	w.kstr("name", t.GetName())
	if d := t.GetDescription(); d != "" {
		w.kstr("description", d)
	}
}

// openAPI reports whether the tool's schema is a Gemini OpenAPI Schema (read from
// parameters).
func openAPI(t *compactorv1.Tool) bool {
	return option(t.GetProviderOptions(), "google", optOpenAPISchema).GetBoolValue()
}

// schema writes the tool's input schema as it is, as JSON Schema when it is Gemini's
// OpenAPI Schema and the target is not Gemini, or, when it has none and required is set, as
// an object without properties.
func (l *lowerer) schema(w *jw, t *compactorv1.Tool, required bool) {
	s := t.GetInputSchemaJson()
	switch {
	case s == "":
		if required {
			w.raw(emptySchema)
		}
	case openAPI(t) && l.req.GetProvider() != compactorv1.Provider_PROVIDER_GEMINI:
		w.jsonSchemaOf(strings.TrimSpace(s))
	default:
		w.raw(strings.TrimSpace(s))
	}
}

// toolStrict writes the tool's strict flag where the target has one; Gemini has none.
func (l *lowerer) toolStrict(w *jw, t *compactorv1.Tool, at toolLoc) {
	if t.Strict == nil {
		return
	}
	if l.req.GetProvider() == compactorv1.Provider_PROVIDER_GEMINI {
		if t.GetStrict() {
			l.drop(at, "strict")
		}
		return
	}
	w.key("strict")
	w.boolean(t.GetStrict())
}

// toolOptions writes the options of provider own that the target's definition takes
// (carried), in name order, and names every other option in a warning, except the cache
// marks the target maps and the IR's own schema mark.
func (l *lowerer) toolOptions(w *jw, t *compactorv1.Tool, at toolLoc, own string, carried []string) {
	o := t.GetProviderOptions()
	if len(o) == 0 {
		return
	}
	cached := own == "anthropic" || own == "bedrock"
	for _, prov := range sortedKeys(o) {
		fields := o[prov].GetFields()
		for _, name := range sortedKeys(fields) {
			switch {
			case prov == "google" && name == optOpenAPISchema:
			case cached && (prov == "anthropic" && name == optCacheControl || prov == "bedrock" && name == optCachePoint):
			case prov == own && slices.Contains(carried, name):
				w.key(name)
				w.value(fields[name])
			default:
				l.drop(at, "provider_options."+prov+"."+name)
			}
		}
	}
}

// anthropicToolCache returns the cache_control of a tool for Anthropic (its own, else a
// Bedrock cache point as an ephemeral breakpoint), or nil; a breakpoint past Anthropic's
// limit is dropped with a warning. Tools come first in Anthropic's cache order, so their
// breakpoints are counted first.
func (l *lowerer) anthropicToolCache(t *compactorv1.Tool, at toolLoc) *structpb.Value {
	o := t.GetProviderOptions()
	c := option(o, "anthropic", optCacheControl)
	if c == nil && option(o, "bedrock", optCachePoint) != nil {
		c = ephemeralCache
	}
	if c == nil {
		return nil
	}
	if l.toolCaches++; l.toolCaches > maxCacheBreakpoints {
		l.warn("%s: cache breakpoint dropped: Anthropic allows at most %d, the tools' first", at, maxCacheBreakpoints)
		return nil
	}
	return c
}

// bedrockToolCache returns the cachePoint to write after a tool for Bedrock (its own, else
// an Anthropic breakpoint as a default cache point), or nil.
func bedrockToolCache(t *compactorv1.Tool) *structpb.Value {
	o := t.GetProviderOptions()
	if c := option(o, "bedrock", optCachePoint); c != nil {
		return c
	}
	if option(o, "anthropic", optCacheControl) != nil {
		return defaultCachePoint
	}
	return nil
}

// defaultCachePoint is {"type":"default"}.
var defaultCachePoint = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("default")}})

// jsonSchemaOf writes a Gemini OpenAPI Schema as JSON Schema: type names in lower case
// ("OBJECT" is "object"), nullable as a "null" type beside the schema's own (and a null
// beside its enumeration), through properties, items and anyOf; every other member as it
// is. v is valid JSON, so the recursion is bounded by maxDepth.
func (w *jw) jsonSchemaOf(v string) {
	if kindOf(v) != kindObject {
		w.raw(v)
		return
	}
	nullable := field(v, "nullable") == "true"
	w.obj()
	for k, e := range members(v) {
		switch k {
		case "nullable":
		case "type":
			w.key(k)
			if kindOf(e) != kindString {
				w.raw(e)
				continue
			}
			t := strings.ToLower(unquote(e))
			if !nullable || t == "null" {
				w.str(t)
				continue
			}
			w.arr()
			w.str(t)
			w.str("null")
			w.endArr()
		case "properties":
			w.key(k)
			w.jsonSchemasOf(e, kindObject)
		case "items":
			w.key(k)
			w.jsonSchemaOf(e)
		case "enum":
			// A nullable enumeration lets null through too.
			if !nullable || kindOf(e) != kindArray {
				w.kraw(k, e)
				continue
			}
			w.key(k)
			w.arr()
			for _, x := range elems(e) {
				w.raw(x)
			}
			w.raw("null")
			w.endArr()
		case "anyOf":
			w.key(k)
			w.jsonSchemasOf(e, kindArray)
		default:
			w.kraw(k, e)
		}
	}
	w.endObj()
}

// jsonSchemasOf writes e, Gemini schemas in a container of kind (an object of them, as
// properties, or an array, as anyOf), each through jsonSchemaOf; e of another kind as it is.
func (w *jw) jsonSchemasOf(e string, kind jsonKind) {
	switch {
	case kindOf(e) != kind:
		w.raw(e)
	case kind == kindObject:
		w.obj()
		for k, s := range members(e) {
			w.key(k)
			w.jsonSchemaOf(s)
		}
		w.endObj()
	default:
		w.arr()
		for _, s := range elems(e) {
			w.jsonSchemaOf(s)
		}
		w.endArr()
	}
}

// --- tool choices ---

// choiceNames are the names of the tool choice modes in each format, by mode number ("" where
// the format has none, or, for OpenAI's named tool, an object).
var choiceNames = map[compactorv1.Provider][5]string{
	compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES: {"auto", "auto", "none", "any", "tool"},
	compactorv1.Provider_PROVIDER_OPENAI_CHAT:        {"", "auto", "none", "required", ""},
	compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:   {"", "auto", "none", "required", ""},
	compactorv1.Provider_PROVIDER_GEMINI:             {"", "AUTO", "NONE", "ANY", "ANY"},
	compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:   {"", "auto", "", "any", "tool"},
}

// choiceValue returns the target's tool choice member value for c (Anthropic tool_choice,
// OpenAI tool_choice, Gemini functionCallingConfig, Bedrock toolChoice), "" when c says
// nothing the target writes there, naming what the target cannot express in warnings.
// OpenAI's parallel flag is a member of its own, written by the caller.
func (l *lowerer) choiceValue(c *compactorv1.ToolChoice) string {
	to := l.req.GetProvider()
	mode, tool := c.GetMode(), c.GetMode() == compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL
	typ := choiceNames[to][mode]
	parallel := c.GetDisableParallelToolUse()
	w := jw{first: true}
	switch to {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		if mode == compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_UNSPECIFIED && !parallel {
			return ""
		}
		w.obj()
		w.kstr("type", typ)
		if tool {
			w.kstr("name", c.GetToolName())
		}
		if parallel && mode != compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE {
			w.key("disable_parallel_tool_use")
			w.boolean(true)
		}
		w.endObj()
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		switch {
		case tool:
			w.obj()
			w.kstr("type", "function")
			if to == compactorv1.Provider_PROVIDER_OPENAI_CHAT {
				w.key("function")
				w.obj()
				w.kstr("name", c.GetToolName())
				w.endObj()
			} else {
				w.kstr("name", c.GetToolName())
			}
			w.endObj()
		case typ != "":
			w.str(typ)
		}
	case compactorv1.Provider_PROVIDER_GEMINI, compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		if parallel {
			l.dropField("tool_choice.disable_parallel_tool_use")
		}
		if typ == "" {
			if mode != compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_UNSPECIFIED {
				l.dropField("tool_choice.mode") // Converse has no choice of no tool
			}
			return ""
		}
		w.obj()
		if to == compactorv1.Provider_PROVIDER_GEMINI {
			w.kstr("mode", typ)
			if tool {
				w.key("allowedFunctionNames")
				w.arr()
				w.str(c.GetToolName())
				w.endArr()
			}
		} else {
			w.key(typ)
			w.obj()
			if tool {
				w.kstr("name", c.GetToolName())
			}
			w.endObj()
		}
		w.endObj()
	}
	return string(w.b)
}

// dropField names a request field (not of the messages) that the target cannot take.
func (l *lowerer) dropField(field string) {
	if !l.repeated(field) {
		l.note(field+": not carried to "+ProviderName(l.req.GetProvider()), field, nil)
	}
}

// ToolJSON returns t written as one element of provider p's tool list (for Gemini, a
// function declaration; for Bedrock, a toolConfig.tools entry), as Lower writes it, and the
// warnings Lower would give for it.
func ToolJSON(p compactorv1.Provider, t *compactorv1.Tool) (string, []string, error) {
	if _, ok := ParseProvider(ProviderName(p)); !ok || p == compactorv1.Provider_PROVIDER_UNSPECIFIED {
		return "", nil, engine.Invalid("provider", "unknown provider "+itoa(int(p)))
	}
	if err := validateTools([]*compactorv1.Tool{t}, nil); err != nil {
		return "", nil, err
	}
	l := &lowerer{req: &compactorv1.LowerRequest{Provider: p}}
	l.w.first = true
	l.writeTool(&l.w, t, toolLoc(0))
	l.finishWarnings()
	return string(l.w.b), l.warnings, nil
}
