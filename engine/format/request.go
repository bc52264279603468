package format

import (
	"slices"
	"strconv"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/recalltool"
)

// The request's other fields: what Lower writes before the conversation. In order: the
// members of base_body; those of a rest_body of the target's format that base_body lacks;
// then what Lower adds: the members of a rest_body of another format that have an
// equivalent in the target (genParams, the OpenAI model), the tools (recall_context last,
// with recall_tool), the tool choice. The
// tools and the choice go into the target's own members when base_body (or rest_body) has
// them (mergeTools, mergeChoice). LowerRequest's comments state the contract.

// genParam is a generation parameter several formats have: its member name in each, by
// provider number ("" where the format has none). Gemini's live in generationConfig and
// Bedrock's in inferenceConfig (paramContainer).
type genParam struct {
	names [6]string
	// list: a list of strings (stop sequences), of which OpenAI Chat also takes one alone.
	list bool
}

// genParams are the generation parameters carried between formats (anthropic-sdk-go
// MessageNewParams, openai-go ChatCompletionNewParams and responses.ResponseNewParams, genai
// GenerationConfig, bedrockruntime types.InferenceConfiguration).
var genParams = [...]genParam{
	{names: [6]string{1: "max_tokens", 2: "max_completion_tokens", 3: "max_output_tokens", 4: "maxOutputTokens", 5: "maxTokens"}},
	{names: [6]string{1: "temperature", 2: "temperature", 3: "temperature", 4: "temperature", 5: "temperature"}},
	{names: [6]string{1: "top_p", 2: "top_p", 3: "top_p", 4: "topP", 5: "topP"}},
	{names: [6]string{1: "top_k", 4: "topK"}},
	{names: [6]string{1: "stop_sequences", 2: "stop", 4: "stopSequences", 5: "stopSequences"}, list: true},
	{names: [6]string{1: "stream", 2: "stream", 3: "stream"}},
}

// paramAliases are other names a body may give a generation parameter: OpenAI Chat's older
// max_tokens, and Gemini's snake_case spellings.
var paramAliases = map[compactorv1.Provider]map[string]string{
	compactorv1.Provider_PROVIDER_OPENAI_CHAT: {"max_tokens": "max_completion_tokens"},
	compactorv1.Provider_PROVIDER_GEMINI: {"max_output_tokens": "maxOutputTokens", "top_p": "topP", "top_k": "topK",
		"stop_sequences": "stopSequences"},
}

// anthropicMaxTemperature is the highest temperature Anthropic takes (OpenAI's and Gemini's
// go to 2): a higher one is not carried there.
const anthropicMaxTemperature = 1.0

// paramContainer is the member a format keeps its generation parameters in, "" for the top
// level, with its other spelling.
func paramContainer(p compactorv1.Provider) (string, string) {
	switch p {
	case compactorv1.Provider_PROVIDER_GEMINI:
		return "generationConfig", "generation_config"
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		return "inferenceConfig", "inferenceConfig"
	}
	return "", ""
}

// paramOf returns the generation parameter format p names key, or -1.
func paramOf(p compactorv1.Provider, key string) int {
	if a, ok := paramAliases[p][key]; ok {
		key = a
	}
	for i := range genParams {
		if genParams[i].names[p] == key {
			return i
		}
	}
	return -1
}

func isOpenAI(p compactorv1.Provider) bool {
	return p == compactorv1.Provider_PROVIDER_OPENAI_CHAT || p == compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
}

// compose returns the members Lower writes before the conversation (see the file's comment),
// base being base_body's. Without rest_body, tools and tool choice it is base itself.
func (l *lowerer) compose(base []member) ([]member, error) {
	req := l.req
	rest := strings.TrimSpace(req.GetRestBody())
	tools, choice := req.GetTools(), req.GetToolChoice()
	if rest == "{}" {
		rest = ""
	}
	if rest == "" && len(tools) == 0 && choice == nil && !req.GetRecallTool() {
		return base, nil
	}
	if err := validateTools(tools, choice); err != nil {
		return nil, err
	}
	out := base // base_body's members, which nothing else holds: out may change them
	from := req.GetRestProvider()
	var ts *toolState
	if rest != "" {
		rp := &jpath{key: "rest_body"}
		if err := validateJSON(rest, rp); err != nil {
			return nil, err
		}
		if kindOf(rest) != kindObject {
			return nil, rp.invalid("must be a JSON object, not " + kindName(kindOf(rest)))
		}
		if _, ok := ParseProvider(ProviderName(from)); !ok {
			return nil, engine.Invalid("rest_provider", "required with rest_body: the format rest_body is in (LiftResponse.provider)")
		}
		ts = readTools(func(k string) string { return field(rest, k) }, from, rp)
		if len(tools) == 0 {
			tools = ts.tools
		}
		if choice == nil {
			choice = ts.choice
		}
		if from == req.GetProvider() {
			have := make(map[string]bool, len(out))
			for _, m := range out {
				have[m.key] = true
			}
			for k, v := range members(rest) {
				if !have[k] {
					have[k] = true
					out = append(out, member{k, v})
				}
			}
		} else {
			out = l.carryRest(out, rest, from, ts, req.GetToolChoice() != nil)
		}
	}
	if req.GetRecallTool() {
		tools = append(slices.Clip(tools), recalltool.Tool())
	}
	if len(tools) > 0 {
		out = l.mergeTools(out, tools)
	}
	if choice != nil {
		out = l.mergeChoice(out, choice)
	}
	return out, nil
}

// memberIndex returns the index of the member named key, or -1.
func memberIndex(ms []member, key string) int {
	for i, m := range ms {
		if m.key == key {
			return i
		}
	}
	return -1
}

// carryRest adds to out the members of rest (format from, another than the target's) that
// have an equivalent in the target, where out lacks it, and names every other one in a
// warning. Its tools and tool choice are carried by the request's tools and choice (ts is
// what readTools read of them): only what of them has no neutral form is named, the choice
// unless the request gives its own (choiceGiven).
func (l *lowerer) carryRest(out []member, rest string, from compactorv1.Provider, ts *toolState, choiceGiven bool) []member {
	to := l.req.GetProvider()
	c1, c2 := paramContainer(from)
	var nested []member // for the target's container
	for k, v := range members(rest) {
		if !present(v) {
			continue
		}
		switch {
		case isOneOf(k, toolKeys(from)):
		case k == "model":
			if isOpenAI(from) && isOpenAI(to) && memberIndex(out, k) < 0 {
				out = append(out, member{k, v})
			}
		case c1 != "" && (k == c1 || k == c2) && kindOf(v) == kindObject:
			for ik, iv := range members(v) {
				if present(iv) {
					out, nested = l.carryParam(out, nested, from, ik, iv, "rest_body."+k+"."+ik)
				}
			}
		default:
			out, nested = l.carryParam(out, nested, from, k, v, "rest_body."+k)
		}
	}
	for _, o := range ts.odd {
		l.dropField("rest_body." + o.path)
	}
	if ts.choiceOdd != "" && !choiceGiven {
		l.dropField("rest_body." + ts.choiceOdd)
	}
	if len(nested) > 0 {
		out = l.mergeParams(out, nested)
	}
	return out
}

// carryParam carries the generation parameter key = v of format from (named path in
// warnings) into the target: into out at the top level, or into nested for the target's
// container, unless base_body sets it already. One the target lacks is named in a warning.
func (l *lowerer) carryParam(out, nested []member, from compactorv1.Provider, key, v, path string) ([]member, []member) {
	to := l.req.GetProvider()
	i := paramOf(from, key)
	name := ""
	if i >= 0 {
		name = genParams[i].names[to]
	}
	switch {
	case name == "":
		l.dropField(path)
		return out, nested
	case key == "stream" && v == "false":
		return out, nested
	case name == "temperature" && to == compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES && toValue(v).GetNumberValue() > anthropicMaxTemperature:
		l.warn("%s: %s is above Anthropic's highest temperature, 1; not carried", path, v)
		return out, nested
	}
	if genParams[i].list && kindOf(v) == kindString && to != compactorv1.Provider_PROVIDER_OPENAI_CHAT {
		v = "[" + v + "]"
	}
	if c, _ := paramContainer(to); c != "" {
		return out, append(nested, member{name, v})
	}
	if memberIndex(out, name) < 0 && !(name == "max_completion_tokens" && memberIndex(out, "max_tokens") >= 0) {
		out = append(out, member{name, v})
	}
	return out, nested
}

// mergeParams adds the generation parameters in nested to the target's container in out:
// into the one base_body has (those it does not set already, in either spelling), else as a
// new member.
func (l *lowerer) mergeParams(out, nested []member) []member {
	c1, c2 := paramContainer(l.req.GetProvider())
	i := memberIndex(out, c1)
	if i < 0 {
		i = memberIndex(out, c2)
	}
	if i < 0 || kindOf(out[i].val) != kindObject {
		if i >= 0 {
			return out // base_body's own, not an object: the target decides
		}
		w := jw{first: true}
		w.obj()
		for _, m := range nested {
			w.kraw(m.key, m.val)
		}
		w.endObj()
		return append(out, member{c1, string(w.b)})
	}
	have := out[i].val
	w := jw{first: true}
	w.obj()
	for k, v := range members(have) {
		w.kraw(k, v)
	}
	for _, m := range nested {
		if field(have, m.key) == "" && field(have, snakeCase(m.key)) == "" {
			w.kraw(m.key, m.val)
		}
	}
	w.endObj()
	out[i].val = string(w.b)
	return out
}

// snakeCase spells a camelCase name in snake_case (maxOutputTokens: max_output_tokens).
func snakeCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// existingTools reads the target's tools and tool choice that out already holds (a
// definition it cannot read is base_body's business: it is sent as it is).
func (l *lowerer) existingTools(out []member) *toolState {
	return readTools(func(k string) string {
		if i := memberIndex(out, k); i >= 0 {
			return out[i].val
		}
		return ""
	}, l.req.GetProvider(), &jpath{key: "base_body"})
}

// mergeTools writes the request's tools into out: into the target's tool member when out
// has one (each tool it does not define by name is added; one it defines differently is
// named in a warning and left out), else as a new member.
func (l *lowerer) mergeTools(out []member, tools []*compactorv1.Tool) []member {
	to := l.req.GetProvider()
	have := l.existingTools(out)
	var add []int
	for i, t := range tools {
		j := -1
		for k, e := range have.tools {
			if e.GetName() == t.GetName() {
				j = k
				break
			}
		}
		switch {
		case j < 0:
			add = append(add, i)
		case !toolEqual(have.tools[j], t):
			l.warn("%s: base_body defines another tool named %s; base_body's is sent", toolLoc(i), strconv.Quote(t.GetName()))
		}
	}
	if len(add) == 0 {
		return out
	}
	key := "tools"
	if to == compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE {
		key = "toolConfig"
	}
	i := memberIndex(out, key)
	existing := ""
	if i >= 0 {
		existing = out[i].val
	}
	var v string
	switch to {
	case compactorv1.Provider_PROVIDER_GEMINI:
		v = l.geminiToolsValue(existing, tools, add)
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		v = l.toolConfigValue(existing, func(w *jw, old string) {
			w.arr()
			for _, e := range elems(old) {
				w.raw(e)
			}
			for _, k := range add {
				l.writeTool(w, tools[k], toolLoc(k))
			}
			w.endArr()
		}, "tools")
	default:
		w := jw{first: true}
		w.arr()
		for _, e := range elems(existing) {
			w.raw(e)
		}
		for _, k := range add {
			l.writeTool(&w, tools[k], toolLoc(k))
		}
		w.endArr()
		v = string(w.b)
	}
	if i >= 0 {
		out[i].val = v
		return out
	}
	return append(out, member{key, v})
}

// geminiToolsValue returns Gemini's tools: existing's elements, the added function tools as
// declarations of its first element that has functionDeclarations (else of a new element),
// then the added provider tools.
func (l *lowerer) geminiToolsValue(existing string, tools []*compactorv1.Tool, add []int) string {
	fns := 0
	for _, k := range add {
		if tools[k].GetProviderTool() == nil {
			fns++
		}
	}
	decls := func(w *jw, old string) {
		w.arr()
		for _, e := range elems(old) {
			w.raw(e)
		}
		for _, k := range add {
			if tools[k].GetProviderTool() == nil {
				l.writeTool(w, tools[k], toolLoc(k))
			}
		}
		w.endArr()
	}
	w := jw{first: true}
	w.arr()
	done := fns == 0
	for _, e := range elems(existing) {
		if done || gfield(e, "functionDeclarations", "function_declarations") == "" {
			w.raw(e)
			continue
		}
		w.obj()
		for k, v := range members(e) {
			w.key(k)
			if !done && (k == "functionDeclarations" || k == "function_declarations") {
				decls(&w, v)
				done = true
				continue
			}
			w.raw(v)
		}
		w.endObj()
	}
	if !done {
		w.obj()
		w.key("functionDeclarations")
		decls(&w, "")
		w.endObj()
	}
	for _, k := range add {
		if tools[k].GetProviderTool() != nil {
			l.writeTool(&w, tools[k], toolLoc(k))
		}
	}
	w.endArr()
	return string(w.b)
}

// toolConfigValue returns a toolConfig object (Bedrock's, Gemini's): the members of existing
// (a JSON object, or "") with member key written by f from its old value ("" when absent),
// added at the end when existing lacks it.
func (l *lowerer) toolConfigValue(existing string, f func(w *jw, old string), key string) string {
	w := jw{first: true}
	w.obj()
	done := false
	for k, v := range members(existing) {
		w.key(k)
		if k == key && !done {
			f(&w, v)
			done = true
			continue
		}
		w.raw(v)
	}
	if !done {
		w.key(key)
		f(&w, "")
	}
	w.endObj()
	return string(w.b)
}

// mergeChoice writes the request's tool choice into out, unless out sets the target's own
// (then a different one is named in a warning).
func (l *lowerer) mergeChoice(out []member, c *compactorv1.ToolChoice) []member {
	to := l.req.GetProvider()
	have := l.existingTools(out)
	if have.choice != nil || have.choiceOdd != "" {
		if have.choice == nil || !sameChoice(have.choice, c) {
			l.warn("tool_choice: base_body sets its own; base_body's is sent")
		}
		return out
	}
	v := l.choiceValue(c)
	switch to {
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		if v != "" {
			out = append(out, member{"tool_choice", v})
		}
		if c.GetDisableParallelToolUse() && memberIndex(out, "parallel_tool_calls") < 0 {
			out = append(out, member{"parallel_tool_calls", "false"})
		}
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		if v != "" {
			out = append(out, member{"tool_choice", v})
		}
	case compactorv1.Provider_PROVIDER_GEMINI, compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		if v == "" {
			break
		}
		key, inner := "toolConfig", "toolChoice"
		if to == compactorv1.Provider_PROVIDER_GEMINI {
			inner = "functionCallingConfig"
		}
		i := memberIndex(out, key)
		if to == compactorv1.Provider_PROVIDER_GEMINI && i < 0 {
			if i = memberIndex(out, "tool_config"); i >= 0 {
				key, inner = "tool_config", "function_calling_config"
			}
		}
		if i < 0 && to == compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE {
			l.dropField("tool_choice") // Converse takes a choice only beside tools
			break
		}
		tc := l.toolConfigValue(memberOrEmpty(out, i), func(w *jw, _ string) { w.raw(v) }, inner)
		if i >= 0 {
			out[i].val = tc
		} else {
			out = append(out, member{key, tc})
		}
	}
	return out
}

func memberOrEmpty(out []member, i int) string {
	if i < 0 {
		return ""
	}
	return out[i].val
}

// sameChoice reports whether two tool choices say the same.
func sameChoice(a, b *compactorv1.ToolChoice) bool {
	return a.GetMode() == b.GetMode() && a.GetToolName() == b.GetToolName() && a.GetDisableParallelToolUse() == b.GetDisableParallelToolUse()
}
