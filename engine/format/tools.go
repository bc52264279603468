package format

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Tool definitions: the tools a request offers the model, carried between the formats in
// the provider-neutral compactorv1.Tool. readTools reads them (and the tool choice) from a
// body's members; Lower writes them in the target's form (writeTool, in toolwrite.go) and
// merges them with the tools base_body already holds (request.go).

// The members of a tool definition that the neutral form does not model but the provider's
// SDK request type defines, kept in Tool.provider_options[provider] under their API names
// and written back to the formats that take them (anthropic-sdk-go ToolParam, openai-go
// shared.FunctionDefinitionParam and responses.FunctionToolParam, genai
// FunctionDeclaration, bedrockruntime types.ToolSpecification). Anthropic's cache_control
// and Bedrock's cachePoint are kept under names of the IR's own and map onto each other.
var (
	anthropicToolCarried = []string{"type", "defer_loading", "eager_input_streaming", "allowed_callers", "input_examples"}
	chatToolCarried      = []string(nil)
	responsesToolCarried = []string{"defer_loading", "allowed_callers", "output_schema", "async"}
	geminiDeclCarried    = []string{"behavior", "response", "responseJsonSchema"}
	bedrockToolCarried   = []string(nil)
)

// Option names of tool state the IR keeps under names of its own.
const (
	optCacheControl  = "cacheControl"  // anthropic: the tool's cache_control
	optCachePoint    = "cachePoint"    // bedrock: a cachePoint element right after the tool
	optOpenAPISchema = "openAPISchema" // google: the schema came as parameters, an OpenAPI Schema
)

// emptySchema is the input schema written where a target requires one and the tool declares
// none: an object without properties.
const emptySchema = `{"type":"object","properties":{}}`

// toolState is what readTools found in a body: its tools, its tool choice when that maps onto
// ToolChoice, and the paths (relative to the body: "tool_choice", "toolConfig.retrievalConfig",
// "tools[0].bogus") of tool members that have no neutral form.
type toolState struct {
	tools  []*compactorv1.Tool
	choice *compactorv1.ToolChoice
	// choiceOdd is the tool choice member that did not map onto ToolChoice ("" when there is
	// none or it mapped); odd are the other members of no neutral form.
	choiceOdd string
	odd       []string
}

// toolKeys are the top-level members a format keeps its tools and tool choice in.
func toolKeys(p compactorv1.Provider) []string {
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		return anthropicToolKeys
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		return openaiToolKeys
	case compactorv1.Provider_PROVIDER_GEMINI:
		return geminiToolKeys
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		return bedrockToolKeys
	}
	return nil
}

var (
	anthropicToolKeys = []string{"tools", "tool_choice"}
	openaiToolKeys    = []string{"tools", "tool_choice", "parallel_tool_calls"}
	geminiToolKeys    = []string{"tools", "toolConfig", "tool_config"}
	bedrockToolKeys   = []string{"toolConfig"}
)

// readTools reads the tools and the tool choice of a body of format p, whose top-level
// members get returns ("" when absent). Errors name the path under root.
func readTools(get func(string) string, p compactorv1.Provider, root *jpath) (*toolState, error) {
	ts := &toolState{}
	var err error
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		err = ts.anthropic(get, root)
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		err = ts.openai(get, root, false)
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		err = ts.openai(get, root, true)
	case compactorv1.Provider_PROVIDER_GEMINI:
		err = ts.gemini(get, root)
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		err = ts.bedrock(get, root)
	}
	return ts, err
}

// present reports whether a member value is there and not null.
func present(v string) bool { return v != "" && v != "null" }

// toolList checks that v is an array of objects and calls f on each element.
func toolList(v string, p *jpath, f func(e string, ep *jpath) error) error {
	if !present(v) {
		return nil
	}
	if err := want(v, kindArray, p); err != nil {
		return err
	}
	for i, e := range elems(v) {
		ep := p.i(i)
		if err := want(e, kindObject, ep); err != nil {
			return err
		}
		if err := f(e, ep); err != nil {
			return err
		}
	}
	return nil
}

// providerTool makes the Tool of a provider's own tool definition raw, of format f.
func providerTool(f compactorv1.Provider, typ, name, raw string) *compactorv1.Tool {
	if name == "" {
		name = typ
	}
	return &compactorv1.Tool{Name: name, ProviderTool: &compactorv1.ProviderTool{Format: f, Type: typ, Json: raw}}
}

// fnReader reads a function definition in one walk over its members: name, description,
// the schema (under schema), strict, the members in carried (into
// provider_options[prov]), and through special the members a format reads its own way.
// Other members are recorded as odd.
type fnReader struct {
	prov, schema string
	carried      []string
	special      func(t *compactorv1.Tool, k, v string, p *jpath) (bool, error)
}

func (r *fnReader) read(ts *toolState, obj string, p *jpath, rel string) (*compactorv1.Tool, error) {
	t := &compactorv1.Tool{}
	named := false
	for k, v := range members(obj) {
		var err error
		switch {
		case k == "name":
			t.Name, err = str(v, p.k(k), true)
			named = true
		case k == "description":
			t.Description, err = str(v, p.k(k), false)
		case k == r.schema && r.schema != "":
			t.InputSchemaJson, err = schemaValue(v, p.k(k))
		case k == "strict":
			switch kindOf(v) {
			case kindBool:
				b := v == "true"
				t.Strict = &b
			case kindNull:
			default:
				err = p.k(k).invalid("must be a boolean, not " + kindName(kindOf(v)))
			}
		case slices.Contains(r.carried, k):
			if v != "null" {
				setOpt(&t.ProviderOptions, r.prov, k, toValue(v))
			}
		default:
			done := false
			if r.special != nil {
				done, err = r.special(t, k, v, p)
			}
			if !done && err == nil {
				ts.odd = append(ts.odd, rel+"."+k)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if !named {
		return nil, p.k("name").invalid("required string is missing")
	}
	return t, nil
}

// schemaValue reads a JSON Schema member: an object, kept as its raw text; null is none.
func schemaValue(v string, p *jpath) (string, error) {
	switch kindOf(v) {
	case kindObject:
		return v, nil
	case kindNull:
		return "", nil
	}
	return "", p.invalid("must be a JSON Schema object, not " + kindName(kindOf(v)))
}

func (ts *toolState) anthropic(get func(string) string, root *jpath) error {
	r := &fnReader{prov: "anthropic", schema: "input_schema", carried: anthropicToolCarried,
		special: func(t *compactorv1.Tool, k, v string, _ *jpath) (bool, error) {
			if k != "cache_control" {
				return false, nil
			}
			if v != "null" {
				setOpt(&t.ProviderOptions, "anthropic", optCacheControl, toValue(v))
			}
			return true, nil
		}}
	n := 0
	err := toolList(get("tools"), root.k("tools"), func(e string, ep *jpath) error {
		rel := "tools[" + itoa(n) + "]"
		n++
		if typ := sval(field(e, "type")); typ != "" && typ != "custom" {
			ts.tools = append(ts.tools, providerTool(compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, typ, sval(field(e, "name")), e))
			return nil
		}
		t, err := r.read(ts, e, ep, rel)
		if err == nil {
			ts.tools = append(ts.tools, t)
		}
		return err
	})
	if err != nil {
		return err
	}
	if v := get("tool_choice"); present(v) {
		if ts.choice = anthropicChoice(v); ts.choice == nil {
			ts.choiceOdd = "tool_choice"
		}
	}
	return nil
}

func (ts *toolState) openai(get func(string) string, root *jpath, responses bool) error {
	r := &fnReader{prov: "openai", schema: "parameters", carried: chatToolCarried}
	format := compactorv1.Provider_PROVIDER_OPENAI_CHAT
	if responses {
		format = compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
		r.carried = responsesToolCarried
		r.special = func(_ *compactorv1.Tool, k, _ string, _ *jpath) (bool, error) { return k == "type", nil }
	}
	n := 0
	err := toolList(get("tools"), root.k("tools"), func(e string, ep *jpath) error {
		rel := "tools[" + itoa(n) + "]"
		n++
		typ := sval(field(e, "type"))
		if typ != "function" {
			name := sval(field(e, "name"))
			if name == "" {
				name = sval(field(field(e, typ), "name")) // a Chat custom tool: {"type":"custom","custom":{"name":...}}
			}
			ts.tools = append(ts.tools, providerTool(format, typ, name, e))
			return nil
		}
		obj, p := e, ep
		if !responses {
			for k := range members(e) {
				if k != "type" && k != "function" {
					ts.odd = append(ts.odd, rel+"."+k)
				}
			}
			obj, p, rel = field(e, "function"), ep.k("function"), rel+".function"
			if err := want(obj, kindObject, p); err != nil {
				return err
			}
		}
		t, err := r.read(ts, obj, p, rel)
		if err == nil {
			ts.tools = append(ts.tools, t)
		}
		return err
	})
	if err != nil {
		return err
	}
	tc, ptc := get("tool_choice"), get("parallel_tool_calls")
	if present(tc) || present(ptc) {
		var ok bool
		if ts.choice, ok = openaiChoice(tc, ptc, responses); !ok {
			ts.choiceOdd = "tool_choice"
			if !present(tc) {
				ts.choiceOdd = "parallel_tool_calls"
			}
		}
	}
	return nil
}

func (ts *toolState) gemini(get func(string) string, root *jpath) error {
	r := &fnReader{prov: "google", schema: "parametersJsonSchema", carried: geminiDeclCarried,
		special: func(t *compactorv1.Tool, k, v string, p *jpath) (bool, error) {
			var err error
			switch k {
			case "parameters_json_schema":
				t.InputSchemaJson, err = schemaValue(v, p.k(k))
			case "parameters":
				if t.InputSchemaJson, err = schemaValue(v, p.k(k)); err == nil && t.InputSchemaJson != "" {
					setOpt(&t.ProviderOptions, "google", optOpenAPISchema, structpb.NewBoolValue(true))
				}
			case "response_json_schema":
				if v != "null" {
					setOpt(&t.ProviderOptions, "google", k, toValue(v))
				}
			default:
				return false, nil
			}
			return true, err
		}}
	n := 0
	err := toolList(get("tools"), root.k("tools"), func(e string, ep *jpath) error {
		rel := "tools[" + itoa(n) + "]"
		n++
		for k, v := range members(e) {
			if k != "functionDeclarations" && k != "function_declarations" {
				ts.tools = append(ts.tools, providerTool(compactorv1.Provider_PROVIDER_GEMINI, k, "", oneMember(k, v)))
				continue
			}
			m := 0
			if err := toolList(v, ep.k(k), func(d string, dp *jpath) error {
				t, err := r.read(ts, d, dp, rel+"."+k+"["+itoa(m)+"]")
				m++
				if err == nil {
					ts.tools = append(ts.tools, t)
				}
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	key := "toolConfig"
	tc := get(key)
	if !present(tc) {
		key, tc = "tool_config", get("tool_config")
	}
	if !present(tc) {
		return nil
	}
	if err := want(tc, kindObject, root.k(key)); err != nil {
		return err
	}
	for k, v := range members(tc) {
		if k != "functionCallingConfig" && k != "function_calling_config" {
			ts.odd = append(ts.odd, key+"."+k)
			continue
		}
		if ts.choice = geminiChoice(v); ts.choice == nil {
			ts.choiceOdd = key + "." + k
		}
	}
	return nil
}

func (ts *toolState) bedrock(get func(string) string, root *jpath) error {
	tc := get("toolConfig")
	if !present(tc) {
		return nil
	}
	cp := root.k("toolConfig")
	if err := want(tc, kindObject, cp); err != nil {
		return err
	}
	r := &fnReader{prov: "bedrock", carried: bedrockToolCarried,
		special: func(t *compactorv1.Tool, k, v string, p *jpath) (bool, error) {
			if k != "inputSchema" {
				return false, nil
			}
			if err := want(v, kindObject, p.k(k)); err != nil {
				return true, err
			}
			var err error
			t.InputSchemaJson, err = schemaValue(field(v, "json"), p.k(k).k("json"))
			return true, err
		}}
	for k, v := range members(tc) {
		switch k {
		case "tools":
			n := 0
			if err := toolList(v, cp.k(k), func(e string, ep *jpath) error {
				rel := "toolConfig.tools[" + itoa(n) + "]"
				n++
				spec := field(e, "toolSpec")
				if spec == "" {
					typ, name := "", ""
					for k, v := range members(e) {
						typ, name = k, sval(field(v, "name"))
						break
					}
					if prev := len(ts.tools) - 1; typ == "cachePoint" && prev >= 0 && ts.tools[prev].GetProviderTool() == nil {
						setOpt(&ts.tools[prev].ProviderOptions, "bedrock", optCachePoint, toValue(field(e, "cachePoint")))
						return nil
					}
					ts.tools = append(ts.tools, providerTool(compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, typ, name, e))
					return nil
				}
				for k := range members(e) {
					if k != "toolSpec" {
						ts.odd = append(ts.odd, rel+"."+k)
					}
				}
				sp := ep.k("toolSpec")
				if err := want(spec, kindObject, sp); err != nil {
					return err
				}
				t, err := r.read(ts, spec, sp, rel+".toolSpec")
				if err == nil {
					ts.tools = append(ts.tools, t)
				}
				return err
			}); err != nil {
				return err
			}
		case "toolChoice":
			if ts.choice = bedrockChoice(v); ts.choice == nil && present(v) {
				ts.choiceOdd = "toolConfig.toolChoice"
			}
		default:
			ts.odd = append(ts.odd, "toolConfig."+k)
		}
	}
	return nil
}

// oneMember returns the JSON object {key: raw}.
func oneMember(key, raw string) string {
	b := make([]byte, 0, len(key)+len(raw)+4)
	b = append(b, '{')
	b = appendString(b, key)
	b = append(b, ':')
	b = append(b, raw...)
	return string(append(b, '}'))
}

// toolEqual reports whether two tool definitions say the same: the same name, description,
// strictness, options and provider tool, and schemas that are the same JSON value.
func toolEqual(a, b *compactorv1.Tool) bool {
	if a.GetName() != b.GetName() || a.GetDescription() != b.GetDescription() ||
		(a.Strict == nil) != (b.Strict == nil) || a.GetStrict() != b.GetStrict() ||
		!sameJSON(a.GetInputSchemaJson(), b.GetInputSchemaJson()) || !sameOptions(a.GetProviderOptions(), b.GetProviderOptions()) {
		return false
	}
	pa, pb := a.GetProviderTool(), b.GetProviderTool()
	if pa == nil || pb == nil {
		return pa == pb
	}
	return pa.GetFormat() == pb.GetFormat() && pa.GetType() == pb.GetType() && sameJSON(pa.GetJson(), pb.GetJson())
}

// sameOptions reports whether two provider option maps hold the same values.
func sameOptions(a, b map[string]*structpb.Struct) bool {
	if len(a) != len(b) {
		return false
	}
	for k, s := range a {
		if t, ok := b[k]; !ok || !proto.Equal(s, t) {
			return false
		}
	}
	return true
}

// sameJSON reports whether two texts hold the same JSON value: objects compared member by
// member whatever their order, strings by their decoded text, numbers by value. Both are
// valid JSON (or empty), so the recursion is bounded by maxDepth.
func sameJSON(a, b string) bool {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if a == b {
		return true
	}
	ka, kb := kindOf(a), kindOf(b)
	if ka != kb {
		return false
	}
	switch ka {
	case kindObject:
		na := 0
		for k, v := range members(a) {
			na++
			w := field(b, k)
			if w == "" || !sameJSON(v, w) {
				return false
			}
		}
		nb := 0
		for range members(b) {
			nb++
		}
		return na == nb
	case kindArray:
		var ea []string
		for _, e := range elems(a) {
			ea = append(ea, e)
		}
		i := 0
		for _, e := range elems(b) {
			if i >= len(ea) || !sameJSON(ea[i], e) {
				return false
			}
			i++
		}
		return i == len(ea)
	case kindString:
		return unquote(a) == unquote(b)
	case kindNumber:
		return toValue(a).GetNumberValue() == toValue(b).GetNumberValue()
	}
	return false
}

// Tool choices, read from each format's member.

func anthropicChoice(v string) *compactorv1.ToolChoice {
	if kindOf(v) != kindObject {
		return nil
	}
	c := &compactorv1.ToolChoice{}
	for k, e := range members(v) {
		switch k {
		case "type":
			switch sval(e) {
			case "auto":
				c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO
			case "any":
				c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED
			case "none":
				c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE
			case "tool":
				c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL
			default:
				return nil
			}
		case "name":
			c.ToolName = sval(e)
		case "disable_parallel_tool_use":
			if kindOf(e) != kindBool {
				return nil
			}
			c.DisableParallelToolUse = e == "true"
		default:
			return nil
		}
	}
	if (c.Mode == compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL) != (c.ToolName != "") || c.Mode == compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_UNSPECIFIED {
		return nil
	}
	return c
}

// openaiChoice reads tool_choice and parallel_tool_calls (either may be absent). ok is false
// when one of them does not map; the choice is nil when neither says anything.
func openaiChoice(tc, ptc string, responses bool) (c *compactorv1.ToolChoice, ok bool) {
	c = &compactorv1.ToolChoice{}
	switch kindOf(tc) {
	case kindInvalid, kindNull:
	case kindString:
		switch unquote(tc) {
		case "auto":
			c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO
		case "none":
			c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE
		case "required":
			c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED
		default:
			return nil, false
		}
	case kindObject:
		name, n := "", 0
		for k, e := range members(tc) {
			n++
			switch {
			case k == "type" && sval(e) == "function":
			case k == "name" && responses, k == "function" && !responses:
				if !responses {
					for fk := range members(e) {
						if fk != "name" {
							return nil, false
						}
					}
					e = field(e, "name")
				}
				name = sval(e)
			default:
				return nil, false
			}
		}
		if name == "" || n != 2 {
			return nil, false
		}
		c.Mode, c.ToolName = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL, name
	default:
		return nil, false
	}
	switch ptc {
	case "", "null", "true":
	case "false":
		c.DisableParallelToolUse = true
	default:
		return nil, false
	}
	if c.Mode == compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_UNSPECIFIED && !c.DisableParallelToolUse {
		return nil, true
	}
	return c, true
}

// geminiChoice reads a functionCallingConfig: AUTO, NONE, ANY (with one allowed name: that
// tool).
func geminiChoice(v string) *compactorv1.ToolChoice {
	if kindOf(v) != kindObject {
		return nil
	}
	var mode string
	var names []string
	for k, e := range members(v) {
		switch k {
		case "mode":
			mode = sval(e)
		case "allowedFunctionNames", "allowed_function_names":
			if kindOf(e) != kindArray {
				return nil
			}
			for _, n := range elems(e) {
				names = append(names, sval(n))
			}
		default:
			return nil
		}
	}
	c := &compactorv1.ToolChoice{}
	switch {
	case mode == "AUTO" && names == nil:
		c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO
	case mode == "NONE" && names == nil:
		c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE
	case mode == "ANY" && len(names) == 0:
		c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED
	case mode == "ANY" && len(names) == 1 && names[0] != "":
		c.Mode, c.ToolName = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL, names[0]
	default:
		return nil
	}
	return c
}

// bedrockChoice reads a toolChoice union: {"auto":{}}, {"any":{}} or {"tool":{"name":...}}.
func bedrockChoice(v string) *compactorv1.ToolChoice {
	c := &compactorv1.ToolChoice{}
	n := 0
	for k, e := range members(v) {
		n++
		switch k {
		case "auto":
			c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO
		case "any":
			c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED
		case "tool":
			c.Mode, c.ToolName = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL, sval(field(e, "name"))
			if c.ToolName == "" {
				return nil
			}
		default:
			return nil
		}
	}
	if n != 1 {
		return nil
	}
	return c
}
