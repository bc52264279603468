package format

import compactorv1 "github.com/compactord/compactord/api/compactor/v1"

// providerNames are the short names of the provider formats, the one list of them.
var providerNames = [...]struct {
	p    compactorv1.Provider
	name string
}{
	{compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, "anthropic"},
	{compactorv1.Provider_PROVIDER_OPENAI_CHAT, "openai-chat"},
	{compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, "openai-responses"},
	{compactorv1.Provider_PROVIDER_GEMINI, "gemini"},
	{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, "bedrock"},
}

// ProviderName returns the short name of the provider format p, as warnings and errors
// name it: "anthropic", "openai-chat", "openai-responses", "gemini" or "bedrock". Any other
// value (PROVIDER_UNSPECIFIED, or one this build does not know) is "provider N", N its
// number, which ParseProvider does not take.
func ProviderName(p compactorv1.Provider) string {
	for _, n := range providerNames {
		if n.p == p {
			return n.name
		}
	}
	return "provider " + itoa(int(p))
}

// ParseProvider returns the provider format whose ProviderName is name, exactly (lower
// case), and whether there is one.
func ParseProvider(name string) (compactorv1.Provider, bool) {
	for _, n := range providerNames {
		if n.name == name {
			return n.p, true
		}
	}
	return compactorv1.Provider_PROVIDER_UNSPECIFIED, false
}

// detect names the format of a valid JSON object body, or PROVIDER_UNSPECIFIED. The order is
// the one documented on Lift: Responses, Bedrock, Anthropic, OpenAI Chat, Gemini.
func detect(body string) compactorv1.Provider {
	var system, messages, contents, tools string
	bedrockKeys := false
	for k, v := range members(body) {
		switch k {
		case "input":
			return compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
		case "system":
			system = v
		case "messages":
			messages = v
		case "contents":
			contents = v
		case "tools":
			tools = v
		case "inferenceConfig", "additionalModelRequestFields", "additionalModelResponseFieldPaths",
			"guardrailConfig", "promptVariables", "performanceConfig", "requestMetadata":
			bedrockKeys = true
		case "toolConfig":
			// Gemini has a toolConfig too; it counts only next to messages.
			bedrockKeys = bedrockKeys || field(body, "contents") == ""
		}
	}
	if kindOf(messages) == kindArray {
		if bedrockKeys || untypedBlocks(system) || anyMessage(messages, untypedBlocks) {
			return compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE
		}
		if system != "" || anyMessage(messages, anthropicBlocks) || anthropicTools(tools) {
			return compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES
		}
		return compactorv1.Provider_PROVIDER_OPENAI_CHAT
	}
	if contents != "" {
		return compactorv1.Provider_PROVIDER_GEMINI
	}
	return compactorv1.Provider_PROVIDER_UNSPECIFIED
}

// anyMessage reports whether f holds for the content of any message.
func anyMessage(messages string, f func(string) bool) bool {
	for _, m := range elems(messages) {
		if f(field(m, "content")) {
			return true
		}
	}
	return false
}

// untypedBlocks reports whether v is an array holding an object without a "type": Converse
// content blocks are keyed by their kind ({"text": ...}, {"toolUse": ...}).
func untypedBlocks(v string) bool {
	for _, b := range elems(v) {
		if kindOf(b) == kindObject && field(b, "type") == "" {
			return true
		}
	}
	return false
}

// anthropicTools reports whether v is an array holding a tool definition only Anthropic
// writes: one with an input_schema, or a server tool ({"type": "web_search_20250305", ...}),
// where OpenAI Chat's have a "function" or "custom" member.
func anthropicTools(v string) bool {
	for _, t := range elems(v) {
		if field(t, "input_schema") != "" {
			return true
		}
		if typ := sval(field(t, "type")); typ != "" && typ != "function" && typ != "custom" && field(t, typ) == "" {
			return true
		}
	}
	return false
}

// anthropicBlocks reports whether v is an array holding a block only Anthropic uses.
func anthropicBlocks(v string) bool {
	for _, b := range elems(v) {
		switch sval(field(b, "type")) {
		case "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document",
			"compaction", "search_result", "container_upload", "mcp_tool_use", "mcp_tool_result":
			return true
		case "image":
			if field(b, "source") != "" {
				return true
			}
		}
	}
	return false
}
