package format

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
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
// ToolChoice, and the tool members that have no neutral form.
type toolState struct {
	tools  []*compactorv1.Tool
	choice *compactorv1.ToolChoice
	// choiceOdd is the path of a tool choice member that does not map onto ToolChoice ("" when
	// there is none or it mapped); odd are the other members of no neutral form: unknown
	// members of a definition, and definitions that are not well formed (why says how).
	choiceOdd string
	odd       []oddMember
	root      *jpath
}

// oddMember is a tool member of no neutral form: its path relative to the body
// ("tools[0].bogus"), and for a definition not well formed, why.
type oddMember struct{ path, why string }

// skip records what is at p (under the body's root) as of no neutral form, for why.
func (ts *toolState) skip(p *jpath, why string) {
	path := strings.TrimPrefix(strings.TrimPrefix(p.String(), ts.root.String()), ".")
	ts.odd = append(ts.odd, oddMember{path, why})
}

// skipBad records the definition a reading error names as of no neutral form.
func (ts *toolState) skipBad(err error) {
	if ve, ok := err.(*engine.ValidationError); ok && len(ve.Violations) > 0 {
		v := ve.Violations[0]
		ts.odd = append(ts.odd, oddMember{strings.TrimPrefix(strings.TrimPrefix(v.Field, ts.root.String()), "."), v.Description})
		return
	}
	ts.odd = append(ts.odd, oddMember{"tools", err.Error()})
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
// members get returns ("" when absent); paths are under root. It never fails: a definition
// it cannot read is recorded as odd (and stays, as the body wrote it, in rest_body).
func readTools(get func(string) string, p compactorv1.Provider, root *jpath) *toolState {
	ts := &toolState{root: root}
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		ts.anthropic(get)
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		ts.openai(get, false)
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		ts.openai(get, true)
	case compactorv1.Provider_PROVIDER_GEMINI:
		ts.gemini(get)
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		ts.bedrock(get)
	}
	return ts
}

// present reports whether a member value is there and not null.
func present(v string) bool { return v != "" && v != "null" }

// list calls f on each element of the array v at p, an object; an element f fails on, or
// that is not an object, and a v that is not an array, are recorded as odd.
func (ts *toolState) list(v string, p *jpath, f func(e string, ep *jpath) error) {
	if !present(v) {
		return
	}
	if err := want(v, kindArray, p); err != nil {
		ts.skipBad(err)
		return
	}
	for i, e := range elems(v) {
		ep := p.i(i)
		err := want(e, kindObject, ep)
		if err == nil {
			err = f(e, ep)
		}
		if err != nil {
			ts.skipBad(err)
		}
	}
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

func (r *fnReader) read(ts *toolState, obj string, p *jpath) (*compactorv1.Tool, error) {
	t := &compactorv1.Tool{}
	named := false
	for k, v := range members(obj) {
		var err error
		switch {
		case k == "name":
			t.Name, err = str(v, p.k(k), true)
			named = t.Name != ""
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
				ts.skip(p.k(k), "")
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

// add reads the function definition obj with r and adds it, or returns why it cannot.
func (ts *toolState) add(r *fnReader, obj string, p *jpath) error {
	t, err := r.read(ts, obj, p)
	if err == nil {
		ts.tools = append(ts.tools, t)
	}
	return err
}

func (ts *toolState) anthropic(get func(string) string) {
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
	ts.list(get("tools"), ts.root.k("tools"), func(e string, ep *jpath) error {
		if typ := sval(field(e, "type")); typ != "" && typ != "custom" { // a server tool
			ts.tools = append(ts.tools, providerTool(compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, typ, sval(field(e, "name")), e))
			return nil
		}
		return ts.add(r, e, ep)
	})
	if v := get("tool_choice"); present(v) {
		if ts.choice = anthropicChoice(v); ts.choice == nil {
			ts.choiceOdd = "tool_choice"
		}
	}
}

func (ts *toolState) openai(get func(string) string, responses bool) {
	r := &fnReader{prov: "openai", schema: "parameters", carried: chatToolCarried}
	format := compactorv1.Provider_PROVIDER_OPENAI_CHAT
	if responses {
		format = compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
		r.carried = responsesToolCarried
		r.special = func(_ *compactorv1.Tool, k, _ string, _ *jpath) (bool, error) { return k == "type", nil }
	}
	ts.list(get("tools"), ts.root.k("tools"), func(e string, ep *jpath) error {
		typ, err := str(field(e, "type"), ep.k("type"), true)
		if err != nil {
			return err
		}
		if typ != "function" {
			name := sval(field(e, "name"))
			if name == "" {
				name = sval(field(field(e, typ), "name")) // a Chat custom tool: {"type":"custom","custom":{"name":...}}
			}
			ts.tools = append(ts.tools, providerTool(format, typ, name, e))
			return nil
		}
		if responses {
			return ts.add(r, e, ep)
		}
		for k := range members(e) {
			if k != "type" && k != "function" {
				ts.skip(ep.k(k), "")
			}
		}
		fp := ep.k("function")
		fn := field(e, "function")
		if err := want(fn, kindObject, fp); err != nil {
			return err
		}
		return ts.add(r, fn, fp)
	})
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
}

func (ts *toolState) gemini(get func(string) string) {
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
	ts.list(get("tools"), ts.root.k("tools"), func(e string, ep *jpath) error {
		for k, v := range members(e) {
			switch {
			case k == "":
				ts.skip(ep.k(k), "a tool member without a name")
			case k == "functionDeclarations" || k == "function_declarations":
				ts.list(v, ep.k(k), func(d string, dp *jpath) error { return ts.add(r, d, dp) })
			default:
				ts.tools = append(ts.tools, providerTool(compactorv1.Provider_PROVIDER_GEMINI, k, "", oneMember(k, v)))
			}
		}
		return nil
	})
	key := "toolConfig"
	tc := get(key)
	if !present(tc) {
		key, tc = "tool_config", get("tool_config")
	}
	if !present(tc) {
		return
	}
	if kindOf(tc) != kindObject {
		ts.skip(ts.root.k(key), "must be an object")
		return
	}
	for k, v := range members(tc) {
		if k != "functionCallingConfig" && k != "function_calling_config" {
			ts.skip(ts.root.k(key).k(k), "")
			continue
		}
		if ts.choice = geminiChoice(v); ts.choice == nil {
			ts.choiceOdd = key + "." + k
		}
	}
}

func (ts *toolState) bedrock(get func(string) string) {
	tc := get("toolConfig")
	if !present(tc) {
		return
	}
	cp := ts.root.k("toolConfig")
	if kindOf(tc) != kindObject {
		ts.skip(cp, "must be an object")
		return
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
			ts.list(v, cp.k(k), func(e string, ep *jpath) error { return ts.bedrockTool(r, e, ep) })
		case "toolChoice":
			if ts.choice = bedrockChoice(v); ts.choice == nil && present(v) {
				ts.choiceOdd = "toolConfig.toolChoice"
			}
		default:
			ts.skip(cp.k(k), "")
		}
	}
}

// bedrockTool reads one element of a Converse toolConfig.tools: a toolSpec, a cachePoint
// (an option of the tool before it) or a tool of Bedrock's own.
func (ts *toolState) bedrockTool(r *fnReader, e string, ep *jpath) error {
	spec := field(e, "toolSpec")
	if spec == "" {
		typ, name := "", ""
		for k, v := range members(e) {
			typ, name = k, sval(field(v, "name"))
			break
		}
		if typ == "" {
			return ep.invalid("must set toolSpec, cachePoint or systemTool")
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
			ts.skip(ep.k(k), "")
		}
	}
	sp := ep.k("toolSpec")
	if err := want(spec, kindObject, sp); err != nil {
		return err
	}
	return ts.add(r, spec, sp)
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
		// b's members by name (the first of each, as field reads them): a lookup per member
		// of a keeps hostile objects of a million members linear.
		bm := map[string]string{}
		for k, v := range members(b) {
			if _, ok := bm[k]; !ok {
				bm[k] = v
			}
		}
		seen := make(map[string]bool, len(bm))
		for k, v := range members(a) {
			if seen[k] {
				continue
			}
			seen[k] = true
			w, ok := bm[k]
			if !ok || !sameJSON(v, w) {
				return false
			}
		}
		return len(seen) == len(bm)
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

// Tool choices, read from each format's member; the names of the modes are choiceNames.

// choiceMode returns the first mode format p calls name, and whether there is one.
func choiceMode(p compactorv1.Provider, name string) (compactorv1.ToolChoiceMode, bool) {
	names := choiceNames[p]
	for m := 1; m < len(names); m++ {
		if name != "" && names[m] == name {
			return compactorv1.ToolChoiceMode(m), true
		}
	}
	return 0, false
}

func anthropicChoice(v string) *compactorv1.ToolChoice {
	if kindOf(v) != kindObject {
		return nil
	}
	c := &compactorv1.ToolChoice{}
	for k, e := range members(v) {
		ok := true
		switch k {
		case "type":
			c.Mode, ok = choiceMode(compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, sval(e))
		case "name":
			c.ToolName = sval(e)
		case "disable_parallel_tool_use":
			ok = kindOf(e) == kindBool
			c.DisableParallelToolUse = e == "true"
		default:
			ok = false
		}
		if !ok {
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
		if c.Mode, ok = choiceMode(compactorv1.Provider_PROVIDER_OPENAI_CHAT, unquote(tc)); !ok {
			return nil, false
		}
	case kindObject:
		if c.ToolName = namedFunction(tc, responses); c.ToolName == "" {
			return nil, false
		}
		c.Mode = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL
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

// namedFunction returns the function an OpenAI tool choice object names: {"type":"function",
// "function":{"name":...}} in Chat, {"type":"function","name":...} in Responses; "" for any
// other object.
func namedFunction(tc string, responses bool) string {
	name, n := "", 0
	for k, e := range members(tc) {
		n++
		switch {
		case k == "type" && sval(e) == "function":
		case k == "name" && responses:
			name = sval(e)
		case k == "function" && !responses:
			for fk := range members(e) {
				if fk != "name" {
					return ""
				}
			}
			name = sval(field(e, "name"))
		default:
			return ""
		}
	}
	if n != 2 {
		return ""
	}
	return name
}

// geminiChoice reads a functionCallingConfig: AUTO, NONE, ANY (with one allowed name: that
// tool).
func geminiChoice(v string) *compactorv1.ToolChoice {
	if kindOf(v) != kindObject {
		return nil
	}
	c := &compactorv1.ToolChoice{}
	var names []string
	for k, e := range members(v) {
		switch k {
		case "mode":
			c.Mode, _ = choiceMode(compactorv1.Provider_PROVIDER_GEMINI, sval(e))
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
	switch {
	case c.Mode == compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_UNSPECIFIED:
		return nil
	case c.Mode == compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED && len(names) == 1 && names[0] != "":
		c.Mode, c.ToolName = compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL, names[0]
	case names != nil && (c.Mode != compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED || len(names) > 0):
		return nil // names with AUTO or NONE, or several: no ToolChoice says that
	}
	return c
}

// bedrockChoice reads a toolChoice union: {"auto":{}}, {"any":{}} or {"tool":{"name":...}}.
func bedrockChoice(v string) *compactorv1.ToolChoice {
	c := &compactorv1.ToolChoice{}
	n := 0
	for k, e := range members(v) {
		n++
		var ok bool
		if c.Mode, ok = choiceMode(compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, k); !ok {
			return nil
		}
		if c.Mode == compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL {
			if c.ToolName = sval(field(e, "name")); c.ToolName == "" {
				return nil
			}
		}
	}
	if n != 1 {
		return nil
	}
	return c
}
