package format

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// TestLiftTools: each format's tools and tool choice lift to the neutral form: function tools
// with their schema's bytes as the body held them, the members the neutral form does not
// model in provider_options, a provider's own tools whole, and a choice only when it maps.
func TestLiftTools(t *testing.T) {
	cases := []struct {
		name, body string
		want       string // protojson of {"tools": ..., "toolChoice": ...}
	}{
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[],"tools":[{"name":"f","description":"d","input_schema":{ "type" : "object" },"strict":true,"cache_control":{"type":"ephemeral"},"defer_loading":true},{"type":"bash_20250124","name":"bash"}],"tool_choice":{"type":"any"}}`,
			`{"tools":[{"name":"f","description":"d","inputSchemaJson":"{ \"type\" : \"object\" }","strict":true,"providerOptions":{"anthropic":{"cacheControl":{"type":"ephemeral"},"defer_loading":true}}},` +
				`{"name":"bash","providerTool":{"format":"PROVIDER_ANTHROPIC_MESSAGES","type":"bash_20250124","json":"{\"type\":\"bash_20250124\",\"name\":\"bash\"}"}}],"toolChoice":{"mode":"TOOL_CHOICE_MODE_REQUIRED"}}`},
		{"openai-chat", `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},{"type":"custom","custom":{"name":"sql"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`,
			`{"tools":[{"name":"f","inputSchemaJson":"{\"type\":\"object\"}"},{"name":"sql","providerTool":{"format":"PROVIDER_OPENAI_CHAT","type":"custom","json":"{\"type\":\"custom\",\"custom\":{\"name\":\"sql\"}}"}}],` +
				`"toolChoice":{"mode":"TOOL_CHOICE_MODE_TOOL","toolName":"f","disableParallelToolUse":true}}`},
		{"openai-chat, an allowed_tools choice does not map", `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`,
			`{"tools":[{"name":"f"}]}`},
		{"openai-responses", `{"model":"m","input":[],"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":false,"output_schema":{}},{"type":"web_search"}],"tool_choice":"none"}`,
			`{"tools":[{"name":"f","inputSchemaJson":"{\"type\":\"object\"}","strict":false,"providerOptions":{"openai":{"output_schema":{}}}},` +
				`{"name":"web_search","providerTool":{"format":"PROVIDER_OPENAI_RESPONSES","type":"web_search","json":"{\"type\":\"web_search\"}"}}],"toolChoice":{"mode":"TOOL_CHOICE_MODE_NONE"}}`},
		{"gemini", `{"contents":[{"parts":[{"text":"q"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"}},{"name":"g","parametersJsonSchema":{"type":"object"},"behavior":"BLOCKING"}],"googleSearch":{}}],"tool_config":{"function_calling_config":{"mode":"ANY","allowed_function_names":["g"]}}}`,
			`{"tools":[{"name":"f","inputSchemaJson":"{\"type\":\"OBJECT\"}","providerOptions":{"google":{"openAPISchema":true}}},{"name":"g","inputSchemaJson":"{\"type\":\"object\"}","providerOptions":{"google":{"behavior":"BLOCKING"}}},` +
				`{"name":"googleSearch","providerTool":{"format":"PROVIDER_GEMINI","type":"googleSearch","json":"{\"googleSearch\":{}}"}}],"toolChoice":{"mode":"TOOL_CHOICE_MODE_TOOL","toolName":"g"}}`},
		{"bedrock", `{"messages":[],"toolConfig":{"tools":[{"toolSpec":{"name":"f","description":"d","inputSchema":{"json":{"type":"object"}},"strict":true}},{"cachePoint":{"type":"default"}},{"systemTool":{"name":"nova_grounding"}}],"toolChoice":{"auto":{}}}}`,
			`{"tools":[{"name":"f","description":"d","inputSchemaJson":"{\"type\":\"object\"}","strict":true,"providerOptions":{"bedrock":{"cachePoint":{"type":"default"}}}},` +
				`{"name":"nova_grounding","providerTool":{"format":"PROVIDER_BEDROCK_CONVERSE","type":"systemTool","json":"{\"systemTool\":{\"name\":\"nova_grounding\"}}"}}],"toolChoice":{"mode":"TOOL_CHOICE_MODE_AUTO"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Lift(&compactorv1.LiftRequest{Body: c.body})
			if err != nil {
				t.Fatal(err)
			}
			got := &compactorv1.LiftResponse{Tools: l.GetTools(), ToolChoice: l.GetToolChoice()}
			want := &compactorv1.LiftResponse{}
			if err := protojson.Unmarshal([]byte(c.want), want); err != nil {
				t.Fatal(err)
			}
			if !equalLift(got, want) {
				t.Errorf("lifted\n%s\nwant\n%s", protojson.Format(got), protojson.Format(want))
			}
			if l.GetRestBody() == "{}" || field(l.GetRestBody(), "tools")+field(l.GetRestBody(), "toolConfig") == "" {
				t.Errorf("rest_body lost the tools: %s", l.GetRestBody())
			}
		})
	}
}

func equalLift(a, b *compactorv1.LiftResponse) bool {
	if len(a.GetTools()) != len(b.GetTools()) || !sameChoiceOrNil(a.GetToolChoice(), b.GetToolChoice()) {
		return false
	}
	for i := range a.GetTools() {
		if !toolEqual(a.GetTools()[i], b.GetTools()[i]) || a.GetTools()[i].GetInputSchemaJson() != b.GetTools()[i].GetInputSchemaJson() {
			return false
		}
	}
	return true
}

func sameChoiceOrNil(a, b *compactorv1.ToolChoice) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameChoice(a, b)
}

// TestLiftToolsOdd: a tool definition Lift cannot read does not fail the body, which was
// lifted before tools were: it stays in rest_body alone, named in a warning at its path, and a
// Lower into another format names it as not carried.
func TestLiftToolsOdd(t *testing.T) {
	for _, c := range []struct {
		p           compactorv1.Provider
		body, field string
	}{
		{pA, `{"messages":[],"tools":{}}`, "body.tools"},
		{pA, `{"messages":[],"tools":[{"description":"no name"}]}`, "body.tools[0].name"},
		{pA, `{"messages":[],"tools":[{"name":"f","input_schema":"object"}]}`, "body.tools[0].input_schema"},
		{pC, `{"messages":[],"tools":[{"type":"function"}]}`, "body.tools[0].function"},
		{pC, `{"messages":[],"tools":[7]}`, "body.tools[0]"},
		{pC, `{"messages":[],"tools":[{"function":{"name":"f"}}]}`, "body.tools[0].type"},
		{pC, `{"messages":[],"tools":[{"type":"function","function":{"name":"f","strict":1}}]}`, "body.tools[0].function.strict"},
		{pC, `{"messages":[],"tools":[{"type":"function","function":{"name":"f"},"bogus":1}]}`, "body.tools[0].bogus"},
		{pG, `{"contents":[{"parts":[{"text":"q"}]}],"tools":[{"functionDeclarations":[{"name":7}]}]}`, "body.tools[0].functionDeclarations[0].name"},
		{pG, `{"contents":[{"parts":[{"text":"q"}]}],"toolConfig":{"retrievalConfig":{}}}`, "body.toolConfig.retrievalConfig"},
		{pB, `{"messages":[{"role":"user","content":[{"text":"q"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":[]}}]}}`, "body.toolConfig.tools[0].toolSpec.inputSchema"},
		{pB, `{"messages":[{"role":"user","content":[{"text":"q"}]}],"toolConfig":{"tools":[{}]}}`, "body.toolConfig.tools[0]"},
	} {
		l, err := Lift(&compactorv1.LiftRequest{Body: c.body, Provider: c.p})
		if err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if len(l.GetWarnings()) != 1 || !strings.HasPrefix(l.GetWarnings()[0], c.field+": ") || len(l.GetTools()) > 1 {
			t.Errorf("%s: warnings %q, tools %v; want one warning at %s", c.body, l.GetWarnings(), l.GetTools(), c.field)
		}
		to := pG
		if c.p == pG {
			to = pA
		}
		out, err := Lower(&compactorv1.LowerRequest{Messages: []*compactorv1.Message{userMsg(tx("q"))}, Provider: to,
			RestBody: l.GetRestBody(), RestProvider: l.GetProvider(), Tools: l.GetTools()})
		if err != nil {
			t.Fatal(err)
		}
		want := "rest_body." + strings.TrimPrefix(c.field, "body.") + ": not carried to " + ProviderName(to)
		if !slices.Contains(out.GetWarnings(), want) {
			t.Errorf("%s: lowered to %s, warnings %q lack %q", c.body, ProviderName(to), out.GetWarnings(), want)
		}
	}
}

// TestLowerValidatesTools: the request's tools, tool choice and rest_body are checked before
// anything is written, each problem named by its field.
func TestLowerValidatesTools(t *testing.T) {
	msgs := []*compactorv1.Message{userMsg(tx("q"))}
	req := &compactorv1.LowerRequest{Messages: msgs, Provider: pA, Tools: []*compactorv1.Tool{
		{Description: "no name"},
		{Name: "s", InputSchemaJson: `{"type":`},
		{Name: "a", InputSchemaJson: `["not an object"]`},
		{Name: "p", ProviderTool: &compactorv1.ProviderTool{Type: "web_search", Json: `{}`}},
		{Name: "q", ProviderTool: &compactorv1.ProviderTool{Format: pA, Json: `[]`}},
	}, ToolChoice: &compactorv1.ToolChoice{Mode: compactorv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL}}
	_, err := Lower(req)
	var ve *engine.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v", err)
	}
	var fields []string
	for _, v := range ve.Violations {
		fields = append(fields, v.Field)
	}
	want := []string{"tools[0].name", "tools[1].input_schema_json", "tools[2].input_schema_json", "tools[3].provider_tool.format",
		"tools[4].provider_tool.type", "tools[4].provider_tool.json", "tool_choice.tool_name"}
	if !slices.Equal(fields, want) {
		t.Errorf("violations at %q, want %q", fields, want)
	}
	for rest, field := range map[[2]string]string{
		{`{"seed":1}`, ""}:     "rest_provider",
		{`[1]`, "anthropic"}:   "rest_body",
		{`{"a":`, "anthropic"}: "rest_body.a",
	} {
		p, _ := ParseProvider(rest[1])
		_, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: pG, RestBody: rest[0], RestProvider: p})
		if !errors.As(err, &ve) || ve.Violations[0].Field != field {
			t.Errorf("rest_body %s (%s): got %v, want a violation at %s", rest[0], rest[1], err, field)
		}
	}
}

// TestIssue36StrictKeepsTools is the issue's case: an OpenAI Chat body with three tools,
// compacted into Anthropic with a base_body giving model and max_tokens, under strict, keeps
// the tools; a field of the input that Anthropic has no place for fails it, named.
func TestIssue36StrictKeepsTools(t *testing.T) {
	body, err := os.ReadFile("../../internal/corpus/testdata/fixture-swe-units.openai.json")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Lift(&compactorv1.LiftRequest{Body: string(body)})
	if err != nil {
		t.Fatal(err)
	}
	req := &compactorv1.LowerRequest{Messages: l.GetMessages(), Provider: pA, Strict: true,
		BaseBody: `{"model":"claude-sonnet-4-5","max_tokens":1024}`, RestBody: l.GetRestBody(), RestProvider: l.GetProvider(),
		Tools: l.GetTools(), ToolChoice: l.GetToolChoice()}
	out, err := Lower(req)
	if err != nil {
		t.Fatalf("strict: %v", err)
	}
	if got := toolNames(t, pA, out.GetBody()); !slices.Equal(got, []string{"bash", "str_replace_editor", "submit"}) {
		t.Errorf("tools %q in %.300s", got, out.GetBody())
	}
	req.RestBody = strings.Replace(l.GetRestBody(), `{`, `{"seed":7,"logprobs":true,`, 1)
	_, err = Lower(req)
	var se *StrictError
	if !errors.As(err, &se) || !slices.Equal(se.Fields(), []string{"rest_body.seed", "rest_body.logprobs"}) {
		t.Errorf("fields of another format's body: got %v", err)
	}
	// Without strict the same lowering names them and carries the rest.
	req.Strict = false
	if out, err = Lower(req); err != nil || len(out.GetWarnings()) != 2 || !strings.Contains(out.GetBody(), `"name":"submit"`) {
		t.Errorf("got %v, %q", err, out.GetWarnings())
	}
}

// TestBaseBodyTools: tools base_body already holds are kept as they are; the request's are
// added to them unless base_body defines the same name, silently when it is the same tool
// and with a warning (a StrictError under strict) when it is another.
func TestBaseBodyTools(t *testing.T) {
	msgs := []*compactorv1.Message{userMsg(tx("q"))}
	f := &compactorv1.Tool{Name: "f", InputSchemaJson: `{"type":"object","properties":{"a":{"type":"string"}}}`}
	g := &compactorv1.Tool{Name: "g", Description: "g"}
	cases := []struct {
		name       string
		to         compactorv1.Provider
		base, want string // want: the tool member of the body
		warn       string // a warning's field, or ""
	}{
		{"anthropic, the same tool in another member order", pA,
			`{"model":"m","max_tokens":1,"tools":[{"input_schema":{"properties":{"a":{"type":"string"}},"type":"object"},"name":"f"}]}`,
			`[{"input_schema":{"properties":{"a":{"type":"string"}},"type":"object"},"name":"f"},{"name":"g","description":"g","input_schema":{"type":"object","properties":{}}}]`, ""},
		{"openai-chat, another tool named f", pC,
			`{"model":"m","tools":[{"type":"function","function":{"name":"f","description":"other"}}]}`,
			`[{"type":"function","function":{"name":"f","description":"other"}},{"type":"function","function":{"name":"g","description":"g"}}]`, "tools[0]"},
		{"gemini, into the declarations of the element that has them", pG,
			`{"tools":[{"googleSearch":{}},{"functionDeclarations":[{"name":"h"}]}]}`,
			`[{"googleSearch":{}},{"functionDeclarations":[{"name":"h"},{"name":"f","parametersJsonSchema":{"type":"object","properties":{"a":{"type":"string"}}}},{"name":"g","description":"g"}]}]`, ""},
		{"bedrock, into toolConfig beside its choice", pB,
			`{"toolConfig":{"toolChoice":{"any":{}},"tools":[{"toolSpec":{"name":"h","inputSchema":{"json":{}}}}]}}`,
			`{"toolChoice":{"any":{}},"tools":[{"toolSpec":{"name":"h","inputSchema":{"json":{}}}},{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{"a":{"type":"string"}}}}}},{"toolSpec":{"name":"g","description":"g","inputSchema":{"json":{"type":"object","properties":{}}}}}]}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := &compactorv1.LowerRequest{Messages: msgs, Provider: c.to, BaseBody: c.base, Tools: []*compactorv1.Tool{f, g}}
			out, err := Lower(req)
			if err != nil {
				t.Fatal(err)
			}
			key := "tools"
			if c.to == pB {
				key = "toolConfig"
			}
			if got := field(out.GetBody(), key); got != c.want {
				t.Errorf("%s:\n%s\nwant\n%s", key, got, c.want)
			}
			checkConformance(t, c.to, out.GetBody())
			req.Strict = true
			_, err = Lower(req)
			var se *StrictError
			switch {
			case c.warn == "" && err != nil:
				t.Errorf("strict: %v", err)
			case c.warn != "" && (!errors.As(err, &se) || !slices.Contains(se.Fields(), c.warn)):
				t.Errorf("strict: got %v, want a StrictError naming %s", err, c.warn)
			}
		})
	}
}

// TestRestParams: generation parameters of another format's body are written under the
// target's names (its other spellings read too), unless base_body sets them; a value the
// target cannot take is named.
func TestRestParams(t *testing.T) {
	msgs := []*compactorv1.Message{userMsg(tx("q"))}
	cases := []struct {
		name       string
		from, to   compactorv1.Provider
		rest, base string
		want       string // a fragment of the body
		warn       string // a warning's field, or ""
	}{
		{"chat's older max_tokens", pC, pB, `{"max_tokens":9,"stop":"x"}`, "", `"inferenceConfig":{"maxTokens":9,"stopSequences":["x"]}`, ""},
		{"a string stop stays one to chat", pC, pR, `{"model":"gpt-5","stop":"x"}`, "", `{"model":"gpt-5","input"`, "rest_body.stop"},
		{"gemini's snake_case", pG, pA, `{"generation_config":{"max_output_tokens":9,"top_k":3,"seed":1}}`, `{"model":"m"}`, `{"model":"m","max_tokens":9,"top_k":3,`, "rest_body.generation_config.seed"},
		{"base_body's container wins member by member", pA, pG, `{"max_tokens":9,"temperature":0.5}`, `{"generation_config":{"temperature":1}}`, `{"generation_config":{"temperature":1,"maxOutputTokens":9},`, ""},
		{"base_body's own value wins", pB, pC, `{"inferenceConfig":{"maxTokens":9}}`, `{"model":"m","max_tokens":5}`, `{"model":"m","max_tokens":5,"messages"`, ""},
		{"above Anthropic's temperature", pC, pA, `{"temperature":1.5}`, `{"model":"m","max_tokens":1}`, `{"model":"m","max_tokens":1,"messages"`, "rest_body.temperature"},
		{"the model between the OpenAI formats", pR, pC, `{"model":"gpt-5","store":false}`, "", `{"model":"gpt-5","messages"`, "rest_body.store"},
		{"not another provider's model", pC, pA, `{"model":"gpt-5"}`, `{"max_tokens":1}`, `{"max_tokens":1,"messages"`, "base_body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: c.to, BaseBody: c.base, RestBody: c.rest, RestProvider: c.from})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.GetBody(), c.want) {
				t.Errorf("%q not in %s", c.want, out.GetBody())
			}
			var fields []string
			for _, w := range out.GetWarnings() {
				f, _, _ := strings.Cut(w, ": ")
				fields = append(fields, f)
			}
			if c.warn == "" && len(fields) > 0 || c.warn != "" && !slices.Equal(fields, []string{c.warn}) {
				t.Errorf("warnings %q, want one at %q", out.GetWarnings(), c.warn)
			}
			checkConformance(t, c.to, out.GetBody())
		})
	}
}

// TestToolCacheBreakpoints: the tools' cache breakpoints count first against Anthropic's
// four; the system's and messages' that do not fit are dropped, named.
func TestToolCacheBreakpoints(t *testing.T) {
	var tools []*compactorv1.Tool
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		tool := &compactorv1.Tool{Name: n}
		setOpt(&tool.ProviderOptions, "anthropic", optCacheControl, ephemeralCache)
		tools = append(tools, tool)
	}
	out, err := Lower(&compactorv1.LowerRequest{Messages: []*compactorv1.Message{userMsg(withOpt(tx("q"), "anthropic", "cacheControl", ephemeralCache))},
		Provider: pA, BaseBody: `{"model":"m","max_tokens":1}`, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.GetBody(), `"cache_control"`); n != maxCacheBreakpoints {
		t.Errorf("%d breakpoints in %s", n, out.GetBody())
	}
	want := []string{"tools[4]: cache breakpoint dropped: Anthropic allows at most 4, the tools' first", "messages[0].parts[0]: cache breakpoint dropped: Anthropic allows at most 4"}
	if !slices.Equal(out.GetWarnings(), want) {
		t.Errorf("warnings %q, want %q", out.GetWarnings(), want)
	}
}

// TestOpenAPISchema: Gemini's OpenAPI Schema goes elsewhere as JSON Schema: lower-case type
// names, nullable as a null type (and a null in its enumeration), through properties, items
// and anyOf.
func TestOpenAPISchema(t *testing.T) {
	in := `{"type":"OBJECT","properties":{"a":{"type":"STRING","enum":["x"],"nullable":true},"b":{"type":"ARRAY","items":{"type":"INTEGER"}},"c":{"anyOf":[{"type":"NUMBER"},{"type":"BOOLEAN","nullable":false}]}},"required":["a"]}`
	want := `{"type":"object","properties":{"a":{"type":["string","null"],"enum":["x",null]},"b":{"type":"array","items":{"type":"integer"}},"c":{"anyOf":[{"type":"number"},{"type":"boolean"}]}},"required":["a"]}`
	w := jw{first: true}
	w.jsonSchemaOf(in)
	if string(w.b) != want {
		t.Errorf("got\n%s\nwant\n%s", w.b, want)
	}
}

// TestSameJSON: the comparison of schemas and provider tools ignores member order and
// whitespace, not values.
func TestSameJSON(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`{"a":1,"b":[1,{"c":"\u0041"}]}`, ` { "b" : [1.0, {"c":"A"}], "a" : 1 } `, true},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`{"a":1,"b":2}`, `{"a":1}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`[1]`, `[1,1]`, false},
		{`"x"`, `"y"`, false},
		{``, `{}`, false},
		{`true`, `false`, false},
	} {
		if got := sameJSON(c.a, c.b); got != c.same {
			t.Errorf("sameJSON(%s, %s) = %t", c.a, c.b, got)
		}
	}
}
