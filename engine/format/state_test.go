package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// stateCase is one piece of provider state: a body of its format holding it, shaped after
// the SDK request type named in sdk; the IR location of the part (or message) that holds it
// after Lift; and, per other format, a fragment that must appear in the body lowered there
// when the state maps onto something of that format. Every other format must name the drop
// in a warning.
type stateCase struct {
	field  string
	from   compactorv1.Provider
	sdk    string
	body   string
	at     string
	mapped map[compactorv1.Provider]string
	// nonstandard: a field outside the official SDK's types (DeepSeek, OpenRouter, Gemini's
	// OpenAI-compatible endpoint): the body is not checked against the SDK.
	nonstandard bool
}

const (
	pA = compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES
	pC = compactorv1.Provider_PROVIDER_OPENAI_CHAT
	pR = compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
	pG = compactorv1.Provider_PROVIDER_GEMINI
	pB = compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE
)

// Conversation scaffolding around the state under test.
const (
	aUser = `{"role":"user","content":[{"type":"text","text":"q"}]}`
	aHead = `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[` + aUser + `,`
	cHead = `{"model":"gpt-5","messages":[{"role":"user","content":"q"},`
	rHead = `{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]},`
	gHead = `{"contents":[{"role":"user","parts":[{"text":"q"}]},`
	bHead = `{"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}}]},"messages":[{"role":"user","content":[{"text":"q"}]},`
	// aRead is an assistant turn calling a tool (toolu_1) for the user turn after it to answer.
	aRead = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"search","input":{}}]},`
	// searchResult is a search_result block as the SDK writes one, its members in another
	// order and spaced, so that a byte-exact copy shows.
	searchResult = `{"type":"search_result", "title":"Notes","source":"https://example.com/notes","content":[{"type":"text","text":"the answer"}],"citations":{"enabled":true}}`
	call         = `{"type":"function_call","id":"fc_9","call_id":"call_9","name":"f","arguments":"{}","status":"completed"},{"type":"function_call_output","call_id":"call_9","output":"ok"}`
)

func stateCases() []stateCase {
	sig := "EqQBCkYIBhgCIkDZb0Ng7c1x+signature=="
	enc := "gAAAAABpRW5jcnlwdGVkIGNvbnRlbnQ=" // base64, as the providers' encrypted state is
	return append([]stateCase{
		{field: "thinking.signature", from: pA, sdk: "anthropic.ThinkingBlockParam",
			body: aHead + `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"` + sig + `"},{"type":"text","text":"a"}]}]}`,
			at:   "messages[1].parts[0]", mapped: map[compactorv1.Provider]string{pB: sig}},
		{field: "redacted_thinking.data", from: pA, sdk: "anthropic.RedactedThinkingBlockParam",
			body: aHead + `{"role":"assistant","content":[{"type":"redacted_thinking","data":"` + enc + `"},{"type":"text","text":"a"}]}]}`,
			at:   "messages[1].parts[0]", mapped: map[compactorv1.Provider]string{pB: `"redactedContent":"` + enc}},
		{field: "compaction block", from: pA, sdk: "anthropic.BetaCompactionBlockParam",
			body: aHead + `{"role":"assistant","content":[{"type":"compaction","content":"Summary so far","encrypted_content":"` + enc + `","signature":"` + sig + `"},{"type":"text","text":"a"}]}]}`,
			at:   "messages[1].parts[0]"},
		{field: "text.citations (encrypted_index)", from: pA, sdk: "anthropic.TextBlockParam.Citations (CitationWebSearchResultLocationParam)",
			body: aHead + `{"role":"assistant","content":[{"type":"text","text":"a","citations":[{"type":"web_search_result_location","cited_text":"c","encrypted_index":"` + enc + `","title":"t","url":"https://example.com"}]}]}]}`,
			at:   "messages[1].parts[0]"},
		{field: "server_tool_use + web_search_tool_result", from: pA, sdk: "anthropic.ServerToolUseBlockParam, WebSearchToolResultBlockParam",
			body: aHead + `{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://example.com","title":"t","encrypted_content":"` + enc + `","page_age":"1 day"}]},{"type":"text","text":"a"}]}]}`,
			at:   "messages[1].parts[0]"},
		{field: "cache_control", from: pA, sdk: "anthropic.CacheControlEphemeralParam",
			body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral"}}]}]}`,
			at:   "messages[0].parts[0]", mapped: map[compactorv1.Provider]string{pB: `{"cachePoint":{"type":"default"}}`}},
		{field: "tool_result.is_error on rich content", from: pA, sdk: "anthropic.ToolResultBlockParam",
			body: aHead + `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"shot","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"failed"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUg=="}}],"is_error":true}]}]}`,
			at:   "messages[2].parts[0]", mapped: map[compactorv1.Provider]string{pB: `"status":"error"`}},
		{field: "tool_result content: search_result block", from: pA, sdk: "anthropic.ToolResultBlockParamContentUnion.OfSearchResult (SearchResultBlockParam)",
			body: aHead + aRead + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"found"},` + searchResult + `]}]}]}`,
			at:   "messages[2].parts[0].tool_result.output.content.parts[1]"},
		{field: "tool_result content: tool_reference block", from: pA, sdk: "anthropic.ToolResultBlockParamContentUnion.OfToolReference (ToolReferenceBlockParam)",
			body: aHead + aRead + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_reference","tool_name":"grep"}]}]}]}`,
			at:   "messages[2].parts[0].tool_result.output.content.parts[0]"},
		{field: "tool_result content: text.citations", from: pA, sdk: "anthropic.ToolResultBlockParamContentUnion.OfText (TextBlockParam.Citations)",
			body: aHead + aRead + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"see"},{"type":"text","text":"a","citations":[{"type":"char_location","cited_text":"c","document_index":0,"document_title":"d","start_char_index":0,"end_char_index":1}]}]}]}]}`,
			at:   "messages[2].parts[0].tool_result.output.content.parts[1]"},
		{field: "tool_result content: cache_control", from: pA, sdk: "anthropic.ToolResultBlockParamContentUnion.OfText (TextBlockParam.CacheControl)",
			body: aHead + aRead + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUg=="}}]}]}]}`,
			at:   "messages[2].parts[0].tool_result.output.content.parts[0]"},
		{field: "document.context, document.citations", from: pA, sdk: "anthropic.DocumentBlockParam",
			body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"},"title":"t","citations":{"enabled":true},"context":"c"},{"type":"text","text":"q"}]}]}`,
			at:   "messages[0].parts[0]"},

		{field: "reasoning id, encrypted_content, summary parts", from: pR, sdk: "responses.ResponseReasoningItemParam",
			body: rHead + `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"a"},{"type":"summary_text","text":"b"}],"encrypted_content":"` + enc + `"},` + call + `]}`,
			at:   "messages[1].parts[0]"},
		{field: "function_call id, status", from: pR, sdk: "responses.ResponseFunctionToolCallParam",
			body: rHead + call + `]}`, at: "messages[1].parts[0]"},
		{field: "function_call_output id, status", from: pR, sdk: "responses.ResponseInputItemFunctionCallOutputParam",
			body: rHead + `{"type":"function_call","call_id":"call_9","name":"f","arguments":"{}"},{"type":"function_call_output","id":"fco_1","call_id":"call_9","output":"ok","status":"completed"}]}`,
			at:   "messages[2].parts[0]"},
		{field: "message id, status, phase, annotations", from: pR, sdk: "responses.ResponseOutputMessageParam, ResponseOutputTextParam",
			body: rHead + `{"type":"message","id":"msg_1","role":"assistant","status":"completed","phase":"final_answer","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","url":"https://example.com","title":"t","start_index":0,"end_index":1}]},{"type":"output_text","text":"y","annotations":[]}]}]}`,
			at:   "messages[1].parts[0]"},
		{field: "compaction item", from: pR, sdk: "responses.ResponseCompactionItemParam",
			body: rHead + `{"type":"compaction","id":"cmp_1","encrypted_content":"` + enc + `"},{"type":"message","role":"user","content":[{"type":"input_text","text":"next"}]}]}`,
			at:   "messages[1].parts[0]"},
		{field: "item_reference", from: pR, sdk: "responses.ResponseInputItemItemReferenceParam",
			body: rHead + `{"type":"item_reference","id":"rs_2"},` + call + `]}`, at: "messages[1].parts[0]"},

		{field: "tool_calls[].id", from: pC, sdk: "openai.ChatCompletionMessageFunctionToolCallParam",
			body: cHead + `{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_abc","content":"ok"}]}`,
			at:   "messages[1].parts[0]", mapped: map[compactorv1.Provider]string{pA: `"call_abc"`, pR: `"call_abc"`, pG: `"call_abc"`, pB: `"call_abc"`}},
		{field: "refusal", from: pC, sdk: "openai.ChatCompletionAssistantMessageParam.Refusal",
			body: cHead + `{"role":"assistant","content":null,"refusal":"I can't help with that."}]}`, at: "messages[1].parts[0]"},
		{field: "audio.id", from: pC, sdk: "openai.ChatCompletionAssistantMessageParamAudio",
			body: cHead + `{"role":"assistant","content":"a","audio":{"id":"audio_1"}}]}`, at: "messages[1]"},
		{field: "name", from: pC, sdk: "openai.ChatCompletionUserMessageParam.Name",
			body: `{"model":"gpt-5","messages":[{"role":"user","content":"q","name":"alice"}]}`, at: "messages[0]"},
		{field: "reasoning_content (DeepSeek)", from: pC, sdk: "none: DeepSeek's chat API", nonstandard: true,
			body: cHead + `{"role":"assistant","content":"a","reasoning_content":"thinking"}]}`, at: "messages[1].parts[0]"},
		{field: "reasoning_details (OpenRouter)", from: pC, sdk: "none: OpenRouter's chat API", nonstandard: true,
			body: cHead + `{"role":"assistant","content":"a","reasoning_details":[{"type":"reasoning.encrypted","data":"` + enc + `","id":"rs_1","format":"openai-responses-v1","index":0}]}]}`,
			at:   "messages[1]"},
		{field: "extra_content.google.thought_signature", from: pC, sdk: "none: Gemini's OpenAI-compatible API", nonstandard: true,
			body: cHead + `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"extra_content":{"google":{"thought_signature":"` + sig + `"}}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
			at:   "messages[1].parts[0]", mapped: map[compactorv1.Provider]string{pG: `"thoughtSignature":"` + sig}},

		{field: "thoughtSignature on a function call", from: pG, sdk: "genai.Part.ThoughtSignature",
			body: gHead + `{"role":"model","parts":[{"functionCall":{"id":"c1","name":"f","args":{}},"thoughtSignature":"c2lnbmF0dXJl"}]},{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"f","response":{"name":"f","content":"ok"}}}]}]}`,
			at:   "messages[1].parts[0]"},
		{field: "thoughtSignature on an empty text part", from: pG, sdk: "genai.Part.ThoughtSignature",
			body: gHead + `{"role":"model","parts":[{"text":"a"},{"text":"","thoughtSignature":"c2lnbmF0dXJl"}]}]}`, at: "messages[1].parts[1]"},
		{field: "thought parts", from: pG, sdk: "genai.Part.Thought",
			body: gHead + `{"role":"model","parts":[{"text":"thinking","thought":true},{"text":"a"}]}]}`, at: "messages[1].parts[0]"},
		{field: "functionCall without id", from: pG, sdk: "genai.FunctionCall.ID (omitempty)",
			body: gHead + `{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"name":"f","content":"ok"}}}]}]}`,
			at:   "messages[1].parts[0]", mapped: map[compactorv1.Provider]string{pA: `"call_f_1"`, pC: `"call_f_1"`, pR: `"call_f_1"`, pB: `"call_f_1"`}},

		{field: "reasoningContent signature", from: pB, sdk: "bedrockruntime types.ReasoningTextBlock",
			body: bHead + `{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"t","signature":"` + sig + `"}}},{"text":"a"}]}]}`,
			at:   "messages[1].parts[0]", mapped: map[compactorv1.Provider]string{pA: sig}},
		{field: "reasoningContent redactedContent", from: pB, sdk: "bedrockruntime types.ReasoningContentBlockMemberRedactedContent",
			body: bHead + `{"role":"assistant","content":[{"reasoningContent":{"redactedContent":"` + enc + `"}},{"text":"a"}]}]}`,
			at:   "messages[1].parts[0]", mapped: map[compactorv1.Provider]string{pA: `"redacted_thinking","data":"` + enc}},
		{field: "cachePoint", from: pB, sdk: "bedrockruntime types.CachePointBlock",
			body: `{"messages":[{"role":"user","content":[{"text":"q"},{"cachePoint":{"type":"default"}}]}]}`,
			at:   "messages[0].parts[0]", mapped: map[compactorv1.Provider]string{pA: `"cache_control":{"type":"ephemeral"}`}},
		{field: "toolResult status on rich content", from: pB, sdk: "bedrockruntime types.ToolResultBlock.Status",
			body: bHead + `{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"shot","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"failed"},{"image":{"format":"png","source":{"bytes":"iVBORw0KGgoAAAANSUhEUg=="}}}],"status":"error"}}]}]}`,
			at:   "messages[2].parts[0]", mapped: map[compactorv1.Provider]string{pA: `"is_error":true`}},
		{field: "document context, citations", from: pB, sdk: "bedrockruntime types.DocumentBlock",
			body: `{"messages":[{"role":"user","content":[{"document":{"format":"txt","name":"notes","source":{"bytes":"bm90ZXM="},"context":"c","citations":{"enabled":true}}},{"text":"q"}]}]}`,
			at:   "messages[0].parts[0]"},
	}, toolCases()...)
}

// toolCases are the rows of tool definitions, tool choices and generation parameters
// (LiftResponse.tools, tool_choice, rest_body): at is the request field a drop is named by.
func toolCases() []stateCase {
	const (
		fn     = `{"name":"f","description":"d","input_schema":{"type":"object","properties":{"x":{"type":"string"}}}}`
		schema = `{"type":"object","properties":{"x":{"type":"string"}}}`
		aTools = `{"model":"m","max_tokens":1,"messages":[` + aUser + `],"tools":[`
		cTools = `{"model":"gpt-5","messages":[{"role":"user","content":"q"}],"tools":[`
		cFn    = `{"type":"function","function":{"name":"f","parameters":` + schema + `}}`
		rTools = `{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]}],"tools":[`
		gTools = `{"contents":[{"role":"user","parts":[{"text":"q"}]}],"tools":[`
		bTools = `{"messages":[{"role":"user","content":[{"text":"q"}]}],"toolConfig":{"tools":[`
		bFn    = `{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}}`
		cGen   = `{"model":"gpt-5","messages":[{"role":"user","content":"q"}],`
	)
	type m = map[compactorv1.Provider]string
	return []stateCase{
		{field: "tools[] (name, description, input_schema)", from: pA, sdk: "anthropic.ToolParam",
			body: aTools + fn + `]}`, at: "tools[0]", mapped: m{
				pC: `"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":` + schema + `}}]`,
				pR: `"tools":[{"type":"function","name":"f","description":"d","parameters":` + schema + `,"strict":false}]`,
				pG: `"tools":[{"functionDeclarations":[{"name":"f","description":"d","parametersJsonSchema":` + schema + `}]}]`,
				pB: `{"toolSpec":{"name":"f","description":"d","inputSchema":{"json":` + schema + `}}}`}},
		{field: "tools[].cache_control", from: pA, sdk: "anthropic.ToolParam.CacheControl",
			body: aTools + `{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}]}`, at: "tools[0]",
			mapped: m{pB: `{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}},{"cachePoint":{"type":"default"}}`}},
		{field: "server tool (web_search_20250305)", from: pA, sdk: "anthropic.WebSearchTool20250305Param",
			body: aTools + `{"type":"web_search_20250305","name":"web_search","max_uses":2}]}`, at: "tools[0]"},
		{field: "tool_choice: a named tool", from: pA, sdk: "anthropic.ToolChoiceToolParam",
			body: aTools + fn + `],"tool_choice":{"type":"tool","name":"f"}}`, at: "tool_choice", mapped: m{
				pC: `"tool_choice":{"type":"function","function":{"name":"f"}}`, pR: `"tool_choice":{"type":"function","name":"f"}`,
				pG: `"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}`, pB: `"toolChoice":{"tool":{"name":"f"}}`}},
		{field: "tool_choice.disable_parallel_tool_use", from: pA, sdk: "anthropic.ToolChoiceAutoParam",
			body: aTools + fn + `],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`, at: "tool_choice.disable_parallel_tool_use",
			mapped: m{pC: `"tool_choice":"auto","parallel_tool_calls":false`, pR: `"tool_choice":"auto","parallel_tool_calls":false`}},
		{field: "function.strict", from: pC, sdk: "openai.FunctionDefinitionParam.Strict",
			body: cTools + `{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{},"additionalProperties":false},"strict":true}}]}`,
			at:   "tools[0]", mapped: m{pA: `"strict":true`, pR: `"strict":true`, pB: `"strict":true`}},
		{field: `tool_choice: "none"`, from: pC, sdk: "openai.ChatCompletionToolChoiceOptionUnionParam",
			body: cTools + cFn + `],"tool_choice":"none"}`, at: "tool_choice", mapped: m{
				pA: `"tool_choice":{"type":"none"}`, pR: `"tool_choice":"none"`, pG: `"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}`}},
		{field: "custom tool", from: pC, sdk: "openai.ChatCompletionCustomToolParam",
			body: cTools + `{"type":"custom","custom":{"name":"sql","description":"Run SQL."}}]}`, at: "tools[0]"},
		{field: "built-in tool (web_search)", from: pR, sdk: "responses.WebSearchToolParam",
			body: rTools + `{"type":"web_search"}]}`, at: "tools[0]"},
		{field: "function defer_loading", from: pR, sdk: "responses.FunctionToolParam.DeferLoading",
			body: rTools + `{"type":"function","name":"f","parameters":` + schema + `,"strict":false,"defer_loading":true}]}`, at: "tools[0]"},
		{field: "parameters (OpenAPI Schema)", from: pG, sdk: "genai.FunctionDeclaration.Parameters",
			body: gTools + `{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT","properties":{"x":{"type":"STRING","nullable":true}}}}]}]}`,
			at:   "tools[0]", mapped: m{
				pA: `"input_schema":{"type":"object","properties":{"x":{"type":["string","null"]}}}`,
				pC: `"parameters":{"type":"object","properties":{"x":{"type":["string","null"]}}}`,
				pR: `"parameters":{"type":"object","properties":{"x":{"type":["string","null"]}}}`,
				pB: `"json":{"type":"object","properties":{"x":{"type":["string","null"]}}}`}},
		{field: "googleSearch tool", from: pG, sdk: "genai.Tool.GoogleSearch",
			body: gTools + `{"googleSearch":{}}]}`, at: "tools[0]"},
		{field: "functionCallingConfig ANY", from: pG, sdk: "genai.FunctionCallingConfig",
			body: gTools + `{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`, at: "tool_choice",
			mapped: m{pA: `"tool_choice":{"type":"any"}`, pC: `"tool_choice":"required"`, pR: `"tool_choice":"required"`, pB: `"toolChoice":{"any":{}}`}},
		{field: "toolSpec + cachePoint", from: pB, sdk: "bedrockruntime types.ToolSpecification, ToolMemberCachePoint",
			body: bTools + bFn + `,{"cachePoint":{"type":"default"}}]}}`, at: "tools[0]",
			mapped: m{pA: `"cache_control":{"type":"ephemeral"}`}},
		{field: "systemTool", from: pB, sdk: "bedrockruntime types.SystemTool",
			body: bTools + bFn + `,{"systemTool":{"name":"nova_grounding"}}]}}`, at: "tools[1]"},
		{field: "max tokens, temperature, top_p", from: pC, sdk: "openai.ChatCompletionNewParams",
			body: cGen + `"max_completion_tokens":100,"temperature":0.5,"top_p":0.9}`, at: "rest_body", mapped: m{
				pA: `"temperature":0.5,"top_p":0.9`, pR: `"max_output_tokens":100,"temperature":0.5,"top_p":0.9`,
				pG: `"generationConfig":{"maxOutputTokens":100,"temperature":0.5,"topP":0.9}`, pB: `"inferenceConfig":{"maxTokens":100,"temperature":0.5,"topP":0.9}`}},
		{field: "stop", from: pC, sdk: "openai.ChatCompletionNewParamsStopUnion",
			body: cGen + `"stop":["x"]}`, at: "rest_body.stop", mapped: m{
				pA: `"stop_sequences":["x"]`, pG: `"generationConfig":{"stopSequences":["x"]}`, pB: `"inferenceConfig":{"stopSequences":["x"]}`}},
		{field: "seed", from: pC, sdk: "openai.ChatCompletionNewParams.Seed",
			body: cGen + `"seed":7}`, at: "rest_body.seed"},
	}
}

// conversationOf decodes a body's conversation members for comparison.
func conversationOf(t *testing.T, p compactorv1.Provider, body string) map[string]any {
	t.Helper()
	var all map[string]any
	d := json.NewDecoder(strings.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&all); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	out := map[string]any{}
	conv := map[compactorv1.Provider][]string{pA: anthropicFields, pC: chatFields, pR: responsesFields, pG: geminiFields, pB: bedrockFields}[p]
	for _, k := range append(slices.Clip(conv), toolKeys(p)...) {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	return out
}

// stateOutcome lowers the lifted case to target and says what became of the state:
// "round trip" (same format: the conversation comes back equal, member for member),
// "mapped" (the target's equivalent is in the body), "dropped, warned" (a warning names it).
// It fails the test on anything else: a silent drop.
func stateOutcome(t *testing.T, c stateCase, lifted *compactorv1.LiftResponse, target compactorv1.Provider) string {
	t.Helper()
	base := map[compactorv1.Provider]string{pA: `{"model":"m","max_tokens":1}`, pC: `{"model":"gpt-5"}`, pB: bedrockTools}[target]
	if target == c.from {
		base = lifted.GetRestBody()
	}
	// keep_history: a provider compaction is a summary boundary, and without it what precedes
	// the boundary is not sent (TestProviderCompactionIsABoundary).
	out, err := Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: target, BaseBody: base, KeepHistory: true,
		Tools: lifted.GetTools(), ToolChoice: lifted.GetToolChoice(), RestBody: lifted.GetRestBody(), RestProvider: c.from})
	if err != nil {
		t.Fatalf("lower to %s: %v", ProviderName(target), err)
	}
	if !c.nonstandard || target != c.from {
		checkConformance(t, target, out.GetBody())
	}
	if target == c.from {
		want, got := conversationOf(t, c.from, c.body), conversationOf(t, c.from, out.GetBody())
		if !reflect.DeepEqual(want, got) {
			t.Errorf("same-format round trip changed the body:\nin:  %s\nout: %s", c.body, out.GetBody())
		}
		if len(out.GetWarnings()) > 0 {
			t.Errorf("same-format round trip warned: %q", out.GetWarnings())
		}
		return "round trip"
	}
	if frag := c.mapped[target]; frag != "" {
		if !strings.Contains(out.GetBody(), frag) {
			t.Errorf("to %s: %q not in %s", ProviderName(target), frag, out.GetBody())
		}
		return "mapped"
	}
	for _, w := range out.GetWarnings() {
		if strings.HasPrefix(w, c.at) {
			return "dropped, warned"
		}
	}
	t.Errorf("to %s: no warning names %s: %q\n%s", ProviderName(target), c.at, out.GetWarnings(), out.GetBody())
	return "SILENT"
}

// TestProviderStateSurvives lifts each piece of provider state and lowers it to its own
// format (it must come back unchanged, warning-free, in a body the SDK accepts) and to every
// other format (mapped where an equivalent exists, else named in a warning). The outcomes
// are the table in docs/PROVIDERS.md (TestProvidersTable).
func TestProviderStateSurvives(t *testing.T) {
	for _, c := range stateCases() {
		t.Run(ProviderName(c.from)+"/"+c.field, func(t *testing.T) {
			if !c.nonstandard {
				checkConformance(t, c.from, c.body) // the fixture is what the SDK type allows
			}
			lifted, err := Lift(&compactorv1.LiftRequest{Body: c.body, Provider: c.from})
			if err != nil {
				t.Fatal(err)
			}
			if len(lifted.GetWarnings()) > 0 {
				t.Errorf("lift warned: %q", lifted.GetWarnings())
			}
			if err := engine.DefaultLimits().Validate(lifted.GetMessages()); err != nil {
				t.Fatal(err)
			}
			for _, p := range allProviders {
				stateOutcome(t, c, lifted, p)
			}
		})
	}
}

// TestProvidersTable keeps the provider-state table in docs/PROVIDERS.md equal to the
// outcomes TestProviderStateSurvives checks (go test -run TestProvidersTable -update rewrites
// it).
func TestProvidersTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| state | from (SDK type) | anthropic | openai-chat | openai-responses | gemini | bedrock |\n|---|---|---|---|---|---|---|\n")
	for _, c := range stateCases() {
		lifted, err := Lift(&compactorv1.LiftRequest{Body: c.body, Provider: c.from})
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("| `" + c.field + "` | " + ProviderName(c.from) + " (`" + c.sdk + "`) |")
		for _, p := range allProviders {
			b.WriteString(" " + stateOutcome(t, c, lifted, p) + " |")
		}
		b.WriteString("\n")
	}
	const path = "../../docs/PROVIDERS.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- state table: generated by TestProvidersTable -->\n", "<!-- end of state table -->"
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q block", path, begin, end)
	}
	got := append(append(append([]byte{}, doc[:i+len(begin)]...), b.String()...), doc[j:]...)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, doc) {
		t.Errorf("%s's state table differs from the tests' outcomes (go test ./engine/format -run TestProvidersTable -update):\n%s", path, b.String())
	}
}

// TestProviderCompactionIsABoundary: a lifted Anthropic compaction is the latest summary;
// what precedes it is history (not sent, not summarized), the compaction is kept and counted
// at its recorded estimate, it goes back byte-exact, and to another provider it is a named
// drop, or a FAILED_PRECONDITION-class StrictError under strict.
func TestProviderCompactionIsABoundary(t *testing.T) {
	block := `{"type":"compaction","content":"Summary so far","encrypted_content":"gAAAAABo=="}`
	body := aHead + `{"role":"assistant","content":[` + block + `,{"type":"text","text":"a"}]},{"role":"user","content":[{"type":"text","text":"next"}]}]}`
	lifted, err := Lift(&compactorv1.LiftRequest{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	msgs := lifted.GetMessages()
	pp := msgs[1].GetParts()[0].GetProvider()
	if len(msgs) != 4 || pp.GetJson() != block || !pp.GetTokenCountEstimated() || pp.GetTokenCount() != int64(len(block)+3)/4 {
		t.Fatalf("want the compaction alone in messages[1], byte-exact, with an estimated size; got %v", msgs)
	}
	if got := engine.LatestSummary(msgs); got != 1 {
		t.Errorf("LatestSummary = %d, want 1 (the compaction)", got)
	}
	plan, err := engine.Plan(msgs, &compactorv1.Policy{ContextWindow: 100000}, engine.NewCounter(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if d := plan.GetDispositions(); d[0] != compactorv1.Disposition_DISPOSITION_DROP || d[1] != compactorv1.Disposition_DISPOSITION_KEEP {
		t.Errorf("dispositions %v: the history before the compaction must be dropped and the compaction kept", d)
	}
	if n := plan.GetMessageTokens()[1]; n < pp.GetTokenCount() {
		t.Errorf("the compaction counts %d tokens, less than its estimate %d", n, pp.GetTokenCount())
	}
	out, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: pA, BaseBody: lifted.GetRestBody()})
	if err != nil {
		t.Fatal(err)
	}
	if want := aHead[:strings.Index(aHead, `"messages"`)] + `"messages":[{"role":"assistant","content":[` + block + `,{"type":"text","text":"a"}]},{"role":"user","content":[{"type":"text","text":"next"}]}]}`; out.GetBody() != want {
		t.Errorf("lowered:\n%s\nwant:\n%s", out.GetBody(), want)
	}
	for _, p := range []compactorv1.Provider{pC, pR, pG, pB} {
		out, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: p})
		if err != nil {
			t.Fatal(err)
		}
		if w := strings.Join(out.GetWarnings(), "\n"); !strings.Contains(w, "messages[1].parts[0].provider.anthropic.compaction: not carried to "+ProviderName(p)) {
			t.Errorf("to %s: the compaction's drop is not named: %s", ProviderName(p), w)
		}
		_, err = Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: p, Strict: true})
		var se *StrictError
		if !errors.As(err, &se) || !slices.Contains(se.Fields(), "messages[1].parts[0].provider.anthropic.compaction") {
			t.Errorf("strict to %s: got %v, want a StrictError naming the compaction", ProviderName(p), err)
		}
	}
}

// TestStrictLower: strict fails on exactly the lowerings that warn, naming each field, and
// on a base_body that lacks what the target requires.
func TestStrictLower(t *testing.T) {
	msgs := []*compactorv1.Message{userMsg(tx("q")), asstMsg(reasoning("t", "sig"), tx("a"))}
	if _, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: pA, BaseBody: `{"model":"m","max_tokens":1}`, Strict: true}); err != nil {
		t.Errorf("a lossless lowering failed under strict: %v", err)
	}
	_, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: pA, Strict: true})
	var se *StrictError
	if !errors.As(err, &se) || !slices.Contains(se.Fields(), "base_body") {
		t.Errorf("missing model and max_tokens: got %v", err)
	}
	_, err = Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: pG, Strict: true})
	if !errors.As(err, &se) || !slices.Contains(se.Fields(), "messages[1].parts[0].reasoning.signature") {
		t.Errorf("signature to gemini: got %v", err)
	}
}

// TestDropWarningsAggregate: one warning per kind of dropped field, at its first occurrence,
// with the count, past the point where the aggregation switches to a map.
func TestDropWarningsAggregate(t *testing.T) {
	var parts []*compactorv1.Part
	for range 2 {
		for k := range 20 {
			parts = append(parts, withOpt(tx("x"), "openai", "field"+itoa(k), structpb.NewStringValue("v")))
		}
	}
	out, err := Lower(&compactorv1.LowerRequest{Messages: []*compactorv1.Message{userMsg(parts...)}, Provider: pG})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.GetWarnings()) != 20 {
		t.Fatalf("%d warnings, want 20: %q", len(out.GetWarnings()), out.GetWarnings())
	}
	for k, w := range out.GetWarnings() {
		want := "messages[0].parts[" + itoa(k) + "].provider_options.openai.field" + itoa(k) + ": not carried to gemini (2 parts)"
		if w != want {
			t.Errorf("warning %d: %q, want %q", k, w, want)
		}
	}
}

// TestDroppedPartIsWarnedOnce: a part a format cannot take is named once, as dropped; its
// provider options are not reported again as "not carried" (they went with the part), in
// every format and under strict alike.
func TestDroppedPartIsWarnedOnce(t *testing.T) {
	zip := func() *compactorv1.Part {
		p := &compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{MediaType: "application/zip", Source: &compactorv1.FilePart_Data{Data: []byte("PK")}}}}
		for _, prov := range []string{"anthropic", "bedrock"} {
			p = withOpt(p, prov, "context", structpb.NewStringValue("c"))
		}
		return p
	}
	empty := func() *compactorv1.Part {
		return withOpt(tx(""), "openai", "annotations", structpb.NewStringValue("a"))
	}
	cases := []struct {
		name string
		to   compactorv1.Provider
		msgs []*compactorv1.Message
	}{
		{"a zip file to anthropic", pA, []*compactorv1.Message{userMsg(tx("q"), zip())}},
		{"a zip file to bedrock", pB, []*compactorv1.Message{userMsg(tx("q"), zip())}},
		{"an empty text to gemini", pG, []*compactorv1.Message{userMsg(tx("q")), asstMsg(tx("a"), empty())}},
		{"an empty text to openai-chat", pC, []*compactorv1.Message{userMsg(tx("q")), asstMsg(tx("a"), empty())}},
		{"an empty text to openai-responses", pR, []*compactorv1.Message{userMsg(tx("q")), asstMsg(tx("a"), empty())}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := Lower(&compactorv1.LowerRequest{Messages: tc.msgs, Provider: tc.to, BaseBody: `{"model":"m","max_tokens":1}`})
			if err != nil {
				t.Fatal(err)
			}
			var dropped int
			for _, w := range resp.GetWarnings() {
				if strings.Contains(w, "provider_options") {
					t.Errorf("the options of a dropped part reported again: %q", w)
				}
				if strings.Contains(w, "dropped") {
					dropped++
				}
			}
			if dropped != 1 {
				t.Errorf("%d warnings name the drop, want 1: %q", dropped, resp.GetWarnings())
			}
		})
	}
}

// TestToolResultContentState: what a tool_result's content holds beyond text, images and
// documents, and the options on its blocks. An Anthropic search_result block goes back to
// Anthropic byte for byte (and the cited text beside it member for member) and, with those
// citations, is named in a
// warning everywhere else (the path down to the content part), or fails a strict Lower
// naming each; a block of the top-level union that tool_result content does not take is
// refused on Lift, naming the path; an error result of cited text stays content (so its
// citations survive); past the fourth cache breakpoint, one on a content block is dropped,
// named, as any other.
func TestToolResultContentState(t *testing.T) {
	cited := `{"type":"text","text":"a","citations":[{"type":"char_location","cited_text":"c","document_index":0,"document_title":"d","start_char_index":0,"end_char_index":1}]}`
	body := aHead + `{"role":"assistant","content":[{"type":"text","text":"looking"}]},{"role":"user","content":[{"type":"text","text":"go on"}]},` + aRead +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[` + searchResult + `,` + cited + `]}]}]}`
	lifted, err := Lift(&compactorv1.LiftRequest{Body: body, Provider: pA})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.DefaultLimits().Validate(lifted.GetMessages()); err != nil {
		t.Fatal(err)
	}
	content := lifted.GetMessages()[4].GetParts()[0].GetToolResult().GetOutput().GetContent().GetParts()
	if pp := content[0].GetProvider(); pp.GetType() != "search_result" || pp.GetJson() != searchResult || !pp.GetTokenCountEstimated() {
		t.Fatalf("the search_result is not a provider part with its bytes: %v", content[0])
	}
	same, err := Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: pA, BaseBody: lifted.GetRestBody(), Strict: true})
	if err != nil {
		t.Fatalf("strict same-format lower: %v", err)
	}
	if !strings.Contains(same.GetBody(), `"content":[`+searchResult+`,`) || !reflect.DeepEqual(conversationOf(t, pA, body), conversationOf(t, pA, same.GetBody())) {
		t.Errorf("same-format lower: not the search_result byte for byte, or not the conversation:\n%s", same.GetBody())
	}
	const at = "messages[4].parts[0].tool_result.output.content.parts"
	want := []string{at + "[0].provider.anthropic.search_result", at + "[1].provider_options.anthropic.citations"}
	// Bedrock takes tool use only with a toolConfig naming the tool.
	base := func(p compactorv1.Provider) string {
		if p == pB {
			return `{"toolConfig":{"tools":[{"toolSpec":{"name":"search","inputSchema":{"json":{"type":"object"}}}}]}}`
		}
		return `{"model":"m"}`
	}
	for _, p := range []compactorv1.Provider{pC, pR, pG, pB} {
		out, err := Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p, BaseBody: base(p)})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range want {
			if !slices.Contains(out.GetWarnings(), f+": not carried to "+ProviderName(p)) {
				t.Errorf("to %s: no warning names %s: %q", ProviderName(p), f, out.GetWarnings())
			}
		}
		checkConformance(t, p, out.GetBody())
		_, err = Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p, BaseBody: base(p), Strict: true})
		var se *StrictError
		if !errors.As(err, &se) {
			t.Fatalf("strict to %s: %v, want a StrictError", ProviderName(p), err)
		}
		for _, f := range want {
			if !slices.Contains(se.Fields(), f) {
				t.Errorf("strict to %s does not name %s: %q", ProviderName(p), f, se.Fields())
			}
		}
	}

	for _, block := range []string{`{"type":"compaction","content":"s"}`, `{"type":"tool_use","id":"x","name":"f","input":{}}`} {
		bad := aHead + aRead + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a"},` + block + `]}]}]}`
		_, err := Lift(&compactorv1.LiftRequest{Body: bad, Provider: pA})
		var ve *engine.ValidationError
		if !errors.As(err, &ve) || len(ve.Violations) != 1 || ve.Violations[0].Field != "body.messages[2].content[0].content[1].type" {
			t.Errorf("%s in a tool_result: got %v, want INVALID_ARGUMENT naming body.messages[2].content[0].content[1].type", block, err)
		}
	}

	isErr := aHead + aRead + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[` + cited + `],"is_error":true}]}]}`
	lifted, err = Lift(&compactorv1.LiftRequest{Body: isErr, Provider: pA})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: pA, BaseBody: lifted.GetRestBody(), Strict: true})
	if err != nil || !reflect.DeepEqual(conversationOf(t, pA, isErr), conversationOf(t, pA, out.GetBody())) {
		t.Errorf("an error of cited text does not come back: %v\n%s", err, out.GetBody())
	}

	var parts []*compactorv1.Part
	for range maxCacheBreakpoints + 1 {
		parts = append(parts, withOpt(tx("x"), "anthropic", "cacheControl", ephemeral()))
	}
	msgs := []*compactorv1.Message{userMsg(tx("q")), asstMsg(callPart("c1", "f", "{}")), toolMsg(result("c1", contentOut(parts...)))}
	out, err = Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: pA, BaseBody: `{"model":"m","max_tokens":1}`})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.GetBody(), `"cache_control"`); n != maxCacheBreakpoints {
		t.Errorf("%d cache breakpoints written, want %d: %s", n, maxCacheBreakpoints, out.GetBody())
	}
	if w := "messages[2].parts[0].tool_result.output.content.parts[4]: cache breakpoint dropped: Anthropic allows at most 4"; !slices.Contains(out.GetWarnings(), w) {
		t.Errorf("warnings %q, want %q", out.GetWarnings(), w)
	}
}
