package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
)

// Conformance: every lowered body must be one the provider's official Go SDK recognizes.
//
// What is checked, per SDK, and why this way:
//
//   - anthropic-sdk-go (MessageNewParams), openai-go chat (ChatCompletionNewParams) and
//     responses (ResponseNewParams) param types unmarshal through the SDKs' own apijson
//     decoders, which ignore json.Decoder.DisallowUnknownFields: unknown fields are dropped
//     silently, and a union element whose discriminator matches no variant is kept as opaque
//     raw JSON. So two checks replace DisallowUnknownFields: (1) every union in the decoded
//     value resolved to a variant (a reflection walk finds union structs — the ones with Of*
//     fields — whose variants are all unset); (2) re-encoding the decoded value with the SDK
//     keeps every field we sent with the same value (a field the SDK does not know vanishes).
//     The only normalizations allowed are the SDKs' own: Anthropic re-encodes string shorthand
//     (system, tool_result content) as one text block, and OpenAI drops "content": null.
//   - google.golang.org/genai Content is a plain struct: each systemInstruction and contents
//     element is decoded with DisallowUnknownFields, and every part must set exactly one
//     data field.
//   - Bedrock: aws-sdk-go-v2's bedrockruntime client reads, validates and re-serializes the
//     conversation in process (bedrocksdk_test.go); beside it, strict structs written from
//     the AWS Converse API reference are decoded with DisallowUnknownFields for the rules the
//     types do not hold: each union block sets exactly one member, roles alternate, no blank
//     text, the enumerations (image/document format, status, cachePoint type) and the
//     document name characters.
func checkConformance(t *testing.T, p compactorv1.Provider, body string) {
	t.Helper()
	if err := conformanceErr(p, body); err != nil {
		t.Errorf("%s body not recognized by the official SDK types: %v\nbody: %.2000s", ProviderName(p), err, body)
	}
}

// sdkFields are the top-level members of a body that sdkRoundTrip requires to survive the
// SDK's decoding: the conversation, the tools and tool choice, and the generation parameters
// Lower carries between formats.
var sdkFields = map[compactorv1.Provider][]string{
	compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES: {"system", "messages", "tools", "tool_choice",
		"max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "stream"},
	compactorv1.Provider_PROVIDER_OPENAI_CHAT: {"messages", "tools", "tool_choice", "parallel_tool_calls",
		"max_completion_tokens", "temperature", "top_p", "stop", "stream", "model"},
	compactorv1.Provider_PROVIDER_OPENAI_RESPONSES: {"input", "include", "tools", "tool_choice", "parallel_tool_calls",
		"max_output_tokens", "temperature", "top_p", "stream", "model"},
}

func conformanceErr(p compactorv1.Provider, body string) error {
	var err error
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		if strings.Contains(body, `"type":"compaction"`) { // a beta block: the beta API's params
			var v anthropic.BetaMessageNewParams
			err = sdkRoundTrip(body, &v, sdkFields[p])
			break
		}
		var v anthropic.MessageNewParams
		if err = sdkRoundTrip(body, &v, sdkFields[p]); err == nil {
			err = checkAnthropicTools(body, v.Tools)
		}
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		if body, err = checkNamedChoice(body, &struct {
			Item *openai.ChatCompletionNamedToolChoiceParam `json:"item"`
		}{&openai.ChatCompletionNamedToolChoiceParam{}}); err != nil {
			break
		}
		var v openai.ChatCompletionNewParams
		err = sdkRoundTrip(body, &v, sdkFields[p])
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		body, err = checkOutputMessages(body)
		if err != nil {
			break
		}
		if body, err = checkNamedChoice(body, &struct {
			Item *responses.ToolChoiceFunctionParam `json:"item"`
		}{&responses.ToolChoiceFunctionParam{}}); err != nil {
			break
		}
		var v responses.ResponseNewParams
		err = sdkRoundTrip(body, &v, sdkFields[p])
	case compactorv1.Provider_PROVIDER_GEMINI:
		err = checkGemini(body)
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		if err = checkBedrock(body); err == nil {
			err = checkBedrockSDK(body)
		}
	}
	if err == nil {
		err = checkPairing(p, body)
	}
	return err
}

// checkAnthropicTools fails on a tool the SDK read as a variant of another type: its union
// decoder falls back to some variant for a type it does not know, and re-encodes the type as
// it came. A variant's type is the Default of its Type constant; ToolParam's is "custom" or
// none, and it needs an input_schema.
func checkAnthropicTools(body string, tools []anthropic.ToolUnionParam) error {
	for i, raw := range elemsOf(field(body, "tools")) {
		if i >= len(tools) {
			break
		}
		typ := sval(field(raw, "type"))
		if tools[i].OfTool != nil {
			if (typ != "" && typ != "custom") || field(raw, "input_schema") == "" {
				return fmt.Errorf("tools[%d]: no Anthropic tool type matches %.200s", i, raw)
			}
			continue
		}
		if want := variantType(reflect.ValueOf(tools[i])); want != typ {
			return fmt.Errorf("tools[%d]: type %q read as the SDK's %q", i, typ, want)
		}
	}
	return nil
}

// variantType returns the Default of the Type constant of a union's set variant, or "".
func variantType(u reflect.Value) string {
	for i := range u.NumField() {
		f := u.Field(i)
		if !isVariant(u.Type().Field(i).Name) || f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		if m := f.Elem().FieldByName("Type").MethodByName("Default"); m.IsValid() {
			return m.Call(nil)[0].String()
		}
	}
	return ""
}

// elemsOf returns the elements of a JSON array.
func elemsOf(v string) []string {
	var out []string
	for _, e := range elems(v) {
		out = append(out, e)
	}
	return out
}

// checkOutputMessages checks each Responses input item that is an output message (an
// assistant message with an id, as the API returned it) against
// responses.ResponseOutputMessageParam on its own (the SDK's union decoder reads every
// "message" item as an EasyInputMessageParam), and returns the body with those items
// replaced by item references for the check of the rest.
func checkOutputMessages(body string) (string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		return body, err
	}
	var items []json.RawMessage
	if json.Unmarshal(top["input"], &items) != nil {
		return body, nil
	}
	changed := false
	for i, raw := range items {
		var head struct{ Type, ID, Role string }
		if json.Unmarshal(raw, &head) != nil || head.Type != "message" || head.ID == "" || head.Role != "assistant" {
			continue
		}
		var v responses.ResponseOutputMessageParam
		if err := sdkRoundTrip(`{"item":`+string(raw)+`}`, &struct {
			Item *responses.ResponseOutputMessageParam `json:"item"`
		}{&v}, []string{"item"}); err != nil {
			return body, fmt.Errorf("input[%d] (ResponseOutputMessageParam): %w", i, err)
		}
		items[i] = json.RawMessage(`{"type":"item_reference","id":"` + head.ID + `"}`)
		changed = true
	}
	if !changed {
		return body, nil
	}
	top["input"], _ = json.Marshal(items)
	out, err := json.Marshal(top)
	return string(out), err
}

// checkNamedChoice checks an OpenAI tool_choice that names a function against the SDK's
// type for it (into, a struct whose "item" is that type; the SDK's union decoder reads such
// a choice as an allowed_tools one) and returns the body with it replaced by "required" for
// the check of the rest.
func checkNamedChoice(body string, into any) (string, error) {
	tc := field(body, "tool_choice")
	if kindOf(tc) != kindObject || sval(field(tc, "type")) != "function" {
		return body, nil
	}
	if err := sdkRoundTrip(`{"item":`+tc+`}`, into, []string{"item"}); err != nil {
		return body, fmt.Errorf("tool_choice: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		return body, err
	}
	top["tool_choice"] = json.RawMessage(`"required"`)
	out, err := json.Marshal(top)
	return string(out), err
}

func decodeAny(s []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(s))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// sdkRoundTrip decodes body into an SDK params value, checks its unions, re-encodes it and
// requires every member of the given top-level fields to survive.
func sdkRoundTrip(body string, v any, fields []string) error {
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if err := walkUnions(reflect.ValueOf(v), "body"); err != nil {
		return err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("re-encode: %w", err)
	}
	ours, err := decodeAny([]byte(body))
	if err != nil {
		return err
	}
	theirs, err := decodeAny(out)
	if err != nil {
		return err
	}
	om, tm := ours.(map[string]any), theirs.(map[string]any)
	for _, f := range fields {
		if ov, ok := om[f]; ok {
			if err := survives(ov, tm[f], "body."+f); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkUnions fails on an SDK union (a struct with Of* variant fields) none of whose variants
// is set: the SDK did not recognize that element.
func walkUnions(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return walkUnions(v.Elem(), path)
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := walkUnions(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if err := walkUnions(v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		union, set := false, false
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if isVariant(f.Name) {
				union = true
				if !v.Field(i).IsZero() {
					set = true
				}
			}
			if err := walkUnions(v.Field(i), path+"."+f.Name); err != nil {
				return err
			}
		}
		if union && !set && !v.IsZero() {
			return fmt.Errorf("%s: %s matched none of its variants", path, t.Name())
		}
	}
	return nil
}

func isVariant(name string) bool {
	return len(name) > 2 && strings.HasPrefix(name, "Of") && name[2] >= 'A' && name[2] <= 'Z'
}

// survives checks that every value in ours is in theirs.
func survives(ours, theirs any, path string) error {
	switch o := ours.(type) {
	case map[string]any:
		tm, ok := theirs.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: object became %T", path, theirs)
		}
		for k, ov := range o {
			tv, ok := tm[k]
			if !ok {
				if ov == nil {
					continue // the SDK omits nulls it does not need
				}
				return fmt.Errorf("%s.%s: field dropped by the SDK (unknown to it)", path, k)
			}
			if err := survives(ov, tv, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		ta, ok := theirs.([]any)
		if !ok || len(ta) != len(o) {
			return fmt.Errorf("%s: array of %d became %v", path, len(o), theirs)
		}
		for i := range o {
			if err := survives(o[i], ta[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case string:
		if ta, ok := theirs.([]any); ok && len(ta) == 1 {
			// Anthropic re-encodes string shorthand (system, tool_result content) as one text
			// block.
			if b, ok := ta[0].(map[string]any); ok && b["type"] == "text" && b["text"] == o {
				return nil
			}
		}
		if theirs != o {
			return fmt.Errorf("%s: %q became %v", path, o, theirs)
		}
	default:
		if !reflect.DeepEqual(ours, theirs) {
			return fmt.Errorf("%s: %v became %v", path, ours, theirs)
		}
	}
	return nil
}

func strictDecode(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func checkGemini(body string) error {
	var top struct {
		SystemInstruction json.RawMessage   `json:"systemInstruction"`
		Contents          []json.RawMessage `json:"contents"`
		Tools             []json.RawMessage `json:"tools"`
		ToolConfig        json.RawMessage   `json:"toolConfig"`
		GenerationConfig  json.RawMessage   `json:"generationConfig"`
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		return err
	}
	if err := checkGeminiTools(top.Tools, top.ToolConfig, top.GenerationConfig); err != nil {
		return err
	}
	check := func(raw json.RawMessage, path string, system bool) error {
		var c genai.Content
		if err := strictDecode(raw, &c); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !system && c.Role != "user" && c.Role != "model" {
			return fmt.Errorf("%s.role: %q", path, c.Role)
		}
		if len(c.Parts) == 0 {
			return fmt.Errorf("%s.parts: empty", path)
		}
		for i, p := range c.Parts {
			n := 0
			if p.Text != "" || p.Thought {
				n++
			}
			for _, set := range []bool{p.InlineData != nil, p.FileData != nil, p.FunctionCall != nil, p.FunctionResponse != nil} {
				if set {
					n++
				}
			}
			if n != 1 && !(n == 0 && p.ThoughtSignature != nil) { // a signature alone may close a turn
				return fmt.Errorf("%s.parts[%d]: %d data fields set, want exactly one", path, i, n)
			}
			if system && p.Text == "" {
				return fmt.Errorf("%s.parts[%d]: system instruction parts are text", path, i)
			}
			if fr := p.FunctionResponse; fr != nil && (fr.Name == "" || fr.Response == nil) {
				return fmt.Errorf("%s.parts[%d].functionResponse: name and response are required", path, i)
			}
		}
		return nil
	}
	if top.SystemInstruction != nil {
		if err := check(top.SystemInstruction, "systemInstruction", true); err != nil {
			return err
		}
	}
	for i, c := range top.Contents {
		if err := check(c, fmt.Sprintf("contents[%d]", i), false); err != nil {
			return err
		}
	}
	return nil
}

// checkGeminiTools decodes each tools element into genai.Tool, toolConfig into
// genai.ToolConfig and generationConfig into genai.GenerationConfig, strictly; every function
// declaration is named and has at most one of parameters and parametersJsonSchema, and a
// Tool sets at least one member.
func checkGeminiTools(tools []json.RawMessage, toolConfig, generationConfig json.RawMessage) error {
	for i, raw := range tools {
		var tool genai.Tool
		if err := strictDecode(raw, &tool); err != nil {
			return fmt.Errorf("tools[%d]: %w", i, err)
		}
		if reflect.ValueOf(tool).IsZero() {
			return fmt.Errorf("tools[%d]: sets nothing", i)
		}
		for j, d := range tool.FunctionDeclarations {
			if d.Name == "" || (d.Parameters != nil && d.ParametersJsonSchema != nil) {
				return fmt.Errorf("tools[%d].functionDeclarations[%d]: a name and at most one of parameters and parametersJsonSchema", i, j)
			}
		}
	}
	if toolConfig != nil {
		var tc genai.ToolConfig
		if err := strictDecode(toolConfig, &tc); err != nil {
			return fmt.Errorf("toolConfig: %w", err)
		}
	}
	if generationConfig != nil {
		var gc genai.GenerationConfig
		if err := strictDecode(generationConfig, &gc); err != nil {
			return fmt.Errorf("generationConfig: %w", err)
		}
	}
	return nil
}

// Bedrock Converse request shapes, from the AWS API reference (Converse, Message,
// ContentBlock, SystemContentBlock, ImageBlock, DocumentBlock, ToolUseBlock, ToolResultBlock,
// ToolResultContentBlock, ReasoningContentBlock, CachePointBlock).
type (
	brMessage struct {
		Role    string           `json:"role"`
		Content []brContentBlock `json:"content"`
	}
	brContentBlock struct {
		Text             *string      `json:"text,omitempty"`
		Image            *brImage     `json:"image,omitempty"`
		Document         *brDocument  `json:"document,omitempty"`
		ToolUse          *brToolUse   `json:"toolUse,omitempty"`
		ToolResult       *brResult    `json:"toolResult,omitempty"`
		ReasoningContent *brReasoning `json:"reasoningContent,omitempty"`
		CachePoint       *brCache     `json:"cachePoint,omitempty"`
	}
	brSystemBlock struct {
		Text       *string  `json:"text,omitempty"`
		CachePoint *brCache `json:"cachePoint,omitempty"`
	}
	brCache struct {
		Type string `json:"type"`
	}
	brSource struct {
		Bytes      *string `json:"bytes,omitempty"`
		S3Location *struct {
			URI         string `json:"uri"`
			BucketOwner string `json:"bucketOwner,omitempty"`
		} `json:"s3Location,omitempty"`
	}
	brImage struct {
		Format string   `json:"format"`
		Source brSource `json:"source"`
	}
	brDocument struct {
		Format    string   `json:"format"`
		Name      string   `json:"name"`
		Source    brSource `json:"source"`
		Context   *string  `json:"context,omitempty"`
		Citations *struct {
			Enabled bool `json:"enabled"`
		} `json:"citations,omitempty"`
	}
	brToolUse struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	}
	brResult struct {
		ToolUseID string            `json:"toolUseId"`
		Content   []brResultContent `json:"content"`
		Status    string            `json:"status,omitempty"`
	}
	brResultContent struct {
		Text     *string         `json:"text,omitempty"`
		JSON     json.RawMessage `json:"json,omitempty"`
		Image    *brImage        `json:"image,omitempty"`
		Document *brDocument     `json:"document,omitempty"`
	}
	brToolConfig struct {
		Tools      []brTool `json:"tools"`
		ToolChoice *struct {
			Auto *struct{} `json:"auto,omitempty"`
			Any  *struct{} `json:"any,omitempty"`
			Tool *struct {
				Name string `json:"name"`
			} `json:"tool,omitempty"`
		} `json:"toolChoice,omitempty"`
	}
	brTool struct {
		ToolSpec *struct {
			Name        string  `json:"name"`
			Description *string `json:"description,omitempty"`
			InputSchema struct {
				JSON json.RawMessage `json:"json"`
			} `json:"inputSchema"`
			Strict *bool `json:"strict,omitempty"`
		} `json:"toolSpec,omitempty"`
		CachePoint *brCache `json:"cachePoint,omitempty"`
		SystemTool *struct {
			Name string `json:"name"`
		} `json:"systemTool,omitempty"`
	}
	brInference struct {
		MaxTokens     *int32   `json:"maxTokens,omitempty"`
		StopSequences []string `json:"stopSequences,omitempty"`
		Temperature   *float32 `json:"temperature,omitempty"`
		TopP          *float32 `json:"topP,omitempty"`
	}
	brReasoning struct {
		ReasoningText *struct {
			Text      string `json:"text"`
			Signature string `json:"signature,omitempty"`
		} `json:"reasoningText,omitempty"`
		RedactedContent *string `json:"redactedContent,omitempty"`
	}
)

var brDocName = regexp.MustCompile(`^[A-Za-z0-9\-()\[\]]+( [A-Za-z0-9\-()\[\]]+)*$`)

func count(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

func checkBedrock(body string) error {
	var top struct {
		System          json.RawMessage `json:"system"`
		Messages        json.RawMessage `json:"messages"`
		ToolConfig      json.RawMessage `json:"toolConfig"`
		InferenceConfig json.RawMessage `json:"inferenceConfig"`
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		return err
	}
	if err := checkBedrockTools(top.ToolConfig, top.InferenceConfig); err != nil {
		return err
	}
	if top.System != nil {
		var sys []brSystemBlock
		if err := strictDecode(top.System, &sys); err != nil {
			return fmt.Errorf("system: %w", err)
		}
		for i, b := range sys {
			if count(b.Text != nil, b.CachePoint != nil) != 1 {
				return fmt.Errorf("system[%d]: exactly one member must be set", i)
			}
			if b.CachePoint != nil && b.CachePoint.Type != "default" {
				return fmt.Errorf("system[%d].cachePoint.type: %q", i, b.CachePoint.Type)
			}
		}
	}
	var msgs []brMessage
	if err := strictDecode(top.Messages, &msgs); err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	for i, m := range msgs {
		path := fmt.Sprintf("messages[%d]", i)
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("%s.role: %q", path, m.Role)
		}
		if i > 0 && msgs[i-1].Role == m.Role {
			return fmt.Errorf("%s: roles must alternate", path)
		}
		if len(m.Content) == 0 {
			return fmt.Errorf("%s.content: empty", path)
		}
		for j, b := range m.Content {
			bp := fmt.Sprintf("%s.content[%d]", path, j)
			if count(b.Text != nil, b.Image != nil, b.Document != nil, b.ToolUse != nil, b.ToolResult != nil, b.ReasoningContent != nil, b.CachePoint != nil) != 1 {
				return fmt.Errorf("%s: exactly one member must be set", bp)
			}
			if err := checkBedrockBlock(b, bp); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkBedrockTools decodes toolConfig and inferenceConfig strictly: each tool sets exactly
// one member, a toolSpec has a name and an object schema, a cache point is "default", the
// tool choice exactly one member.
func checkBedrockTools(toolConfig, inference json.RawMessage) error {
	if inference != nil {
		var ic brInference
		if err := strictDecode(inference, &ic); err != nil {
			return fmt.Errorf("inferenceConfig: %w", err)
		}
	}
	if toolConfig == nil {
		return nil
	}
	var tc brToolConfig
	if err := strictDecode(toolConfig, &tc); err != nil {
		return fmt.Errorf("toolConfig: %w", err)
	}
	for i, t := range tc.Tools {
		tp := fmt.Sprintf("toolConfig.tools[%d]", i)
		if count(t.ToolSpec != nil, t.CachePoint != nil, t.SystemTool != nil) != 1 {
			return fmt.Errorf("%s: exactly one member must be set", tp)
		}
		if s := t.ToolSpec; s != nil && (s.Name == "" || !bytes.HasPrefix(bytes.TrimSpace(s.InputSchema.JSON), []byte("{"))) {
			return fmt.Errorf("%s.toolSpec: a name and an object inputSchema.json are required", tp)
		}
		if t.CachePoint != nil && t.CachePoint.Type != "default" {
			return fmt.Errorf("%s.cachePoint.type: %q", tp, t.CachePoint.Type)
		}
	}
	if c := tc.ToolChoice; c != nil {
		if count(c.Auto != nil, c.Any != nil, c.Tool != nil) != 1 || (c.Tool != nil && c.Tool.Name == "") {
			return errors.New("toolConfig.toolChoice: exactly one of auto, any and a named tool")
		}
	}
	return nil
}

func checkBedrockBlock(b brContentBlock, bp string) error {
	switch {
	case b.Text != nil && strings.TrimSpace(*b.Text) == "":
		return fmt.Errorf("%s.text: blank", bp)
	case b.Image != nil:
		return checkBrImage(b.Image, bp+".image")
	case b.Document != nil:
		return checkBrDoc(b.Document, bp+".document")
	case b.ToolUse != nil:
		if b.ToolUse.ToolUseID == "" || b.ToolUse.Name == "" || !bytes.HasPrefix(bytes.TrimSpace(b.ToolUse.Input), []byte("{")) {
			return fmt.Errorf("%s.toolUse: toolUseId, name and an object input are required", bp)
		}
	case b.ToolResult != nil:
		r := b.ToolResult
		if r.ToolUseID == "" || (r.Status != "" && r.Status != "success" && r.Status != "error") {
			return fmt.Errorf("%s.toolResult: bad toolUseId or status", bp)
		}
		for k, c := range r.Content {
			cp := fmt.Sprintf("%s.toolResult.content[%d]", bp, k)
			if count(c.Text != nil, c.JSON != nil, c.Image != nil, c.Document != nil) != 1 {
				return fmt.Errorf("%s: exactly one member must be set", cp)
			}
			if c.Image != nil {
				if err := checkBrImage(c.Image, cp+".image"); err != nil {
					return err
				}
			}
			if c.Document != nil {
				if err := checkBrDoc(c.Document, cp+".document"); err != nil {
					return err
				}
			}
		}
	case b.ReasoningContent != nil:
		if count(b.ReasoningContent.ReasoningText != nil, b.ReasoningContent.RedactedContent != nil) != 1 {
			return fmt.Errorf("%s.reasoningContent: exactly one member must be set", bp)
		}
	case b.CachePoint != nil:
		if b.CachePoint.Type != "default" {
			return fmt.Errorf("%s.cachePoint.type: %q", bp, b.CachePoint.Type)
		}
	}
	return nil
}

func checkBrSource(s brSource, path string) error {
	if count(s.Bytes != nil, s.S3Location != nil) != 1 {
		return fmt.Errorf("%s.source: exactly one of bytes, s3Location", path)
	}
	return nil
}

func checkBrImage(im *brImage, path string) error {
	switch im.Format {
	case "png", "jpeg", "gif", "webp":
	default:
		return fmt.Errorf("%s.format: %q", path, im.Format)
	}
	return checkBrSource(im.Source, path)
}

func checkBrDoc(d *brDocument, path string) error {
	if _, ok := extMedia[d.Format]; !ok {
		return fmt.Errorf("%s.format: %q", path, d.Format)
	}
	if !brDocName.MatchString(d.Name) {
		return fmt.Errorf("%s.name: %q has characters Bedrock rejects", path, d.Name)
	}
	return checkBrSource(d.Source, path)
}

// TestConformanceGolden checks every golden conversation, lowered to each format.
func TestConformanceGolden(t *testing.T) {
	for _, c := range lowerCases() {
		for _, p := range allProviders {
			req := cloneReq(c.req)
			req.Provider = p
			resp, err := Lower(req)
			if err != nil {
				t.Fatalf("%s/%s: %v", c.name, ProviderName(p), err)
			}
			t.Run(c.name+"/"+ProviderName(p), func(t *testing.T) { checkConformance(t, p, withoutBase(t, resp.GetBody(), req.GetBaseBody())) })
		}
	}
}

// withoutBase returns body without the members it took unchanged from base: those are the
// caller's (a golden case's base_body is shared by every format), not what Lower wrote.
func withoutBase(t *testing.T, body, base string) string {
	t.Helper()
	var top, from map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		t.Fatal(err)
	}
	if base == "" || json.Unmarshal([]byte(base), &from) != nil {
		return body
	}
	for k, v := range from {
		if bytes.Equal(top[k], v) {
			delete(top, k)
		}
	}
	out, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// bedrockTools is a Bedrock base_body whose toolConfig lets tool blocks be sent as such.
const bedrockTools = `{"toolConfig":{"tools":[{"toolSpec":{"name":"lookup","inputSchema":{"json":{"type":"object"}}}}]}}`

// TestConformanceCorpus checks every real conversation, lowered to each format: alone (Bedrock
// also with a toolConfig), and with the body's tools, tool choice and other fields, which must
// all be there, each tool under its name, in a body the SDK types decode.
func TestConformanceCorpus(t *testing.T) {
	for _, f := range toolCorpus(t) {
		lifted, err := Lift(&compactorv1.LiftRequest{Body: f.body})
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		for _, p := range allProviders {
			reqs := []*compactorv1.LowerRequest{
				{Messages: lifted.GetMessages(), Provider: p},
				{Messages: lifted.GetMessages(), Provider: p, Tools: lifted.GetTools(), ToolChoice: lifted.GetToolChoice(),
					RestBody: lifted.GetRestBody(), RestProvider: lifted.GetProvider()},
			}
			if p == compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE {
				reqs = append(reqs, &compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p, BaseBody: bedrockTools})
			}
			for k, req := range reqs {
				resp, err := Lower(req)
				if err != nil {
					t.Fatalf("%s/%s: %v", f.name, ProviderName(p), err)
				}
				t.Run(f.name+"/"+ProviderName(p), func(t *testing.T) {
					checkConformance(t, p, resp.GetBody())
					if k != 1 {
						return
					}
					got, want := toolNames(t, p, resp.GetBody()), carriedNames(lifted.GetTools(), p)
					if !slices.Equal(got, want) {
						t.Errorf("tools in the body %q, want %q\nwarnings: %q", got, want, resp.GetWarnings())
					}
				})
			}
		}
	}
}

// TestToolsRoundTrip: for every format, tools lowered there, lifted and lowered there again
// come back byte for byte, whether from the neutral form alone or with base_body = rest_body;
// and a body's own tools, lifted and lowered to its own format with base_body = rest_body, are
// the tools member it had, byte for byte.
func TestToolsRoundTrip(t *testing.T) {
	for _, f := range toolCorpus(t) {
		lifted, err := Lift(&compactorv1.LiftRequest{Body: f.body})
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if len(lifted.GetTools()) == 0 {
			continue
		}
		own, err := Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: lifted.GetProvider(),
			BaseBody: lifted.GetRestBody(), Tools: lifted.GetTools(), ToolChoice: lifted.GetToolChoice()})
		if err != nil {
			t.Fatal(err)
		}
		if len(own.GetWarnings()) > 0 && !strings.HasPrefix(own.GetWarnings()[0], "base_body: lacks") {
			t.Errorf("%s: lowering to its own format warned: %q", f.name, own.GetWarnings())
		}
		for _, k := range toolKeys(lifted.GetProvider()) {
			if a, b := field(f.body, k), field(own.GetBody(), k); a != b {
				t.Errorf("%s: %s changed:\n%.300s\n%.300s", f.name, k, a, b)
			}
		}
		for _, p := range allProviders {
			// The tools written from the neutral form alone, and with the body's other fields.
			for _, withRest := range []bool{false, true} {
				req := &compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p, Tools: lifted.GetTools(), ToolChoice: lifted.GetToolChoice()}
				if withRest {
					req.RestBody, req.RestProvider = lifted.GetRestBody(), lifted.GetProvider()
				}
				first, err := Lower(req)
				if err != nil {
					t.Fatal(err)
				}
				back, err := Lift(&compactorv1.LiftRequest{Body: first.GetBody(), Provider: p})
				if err != nil {
					t.Fatalf("%s → %s: lift: %v", f.name, ProviderName(p), err)
				}
				again := &compactorv1.LowerRequest{Messages: back.GetMessages(), Provider: p, Tools: back.GetTools(), ToolChoice: back.GetToolChoice()}
				if withRest {
					again.BaseBody = back.GetRestBody()
				}
				second, err := Lower(again)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range toolKeys(p) {
					if a, b := field(first.GetBody(), k), field(second.GetBody(), k); a != b {
						t.Errorf("%s → %s (rest %t): %s is not a fixed point:\n%.300s\n%.300s", f.name, ProviderName(p), withRest, k, a, b)
					}
				}
				if second.GetBody() != first.GetBody() {
					t.Errorf("%s → %s (rest %t): the body is not a fixed point:\n%.400s\n%.400s", f.name, ProviderName(p), withRest, first.GetBody(), second.GetBody())
				}
			}
		}
	}
}

// toolBody is a body of the tool corpus.
type toolBody struct{ name, body string }

// toolCorpus is the corpus (internal/corpus) and the bodies of testdata/tools, which carry
// richer tool definitions (nested objects, enums, arrays, $defs, anyOf, Gemini's OpenAPI
// schema) and each format's own tools and tool choices.
func toolCorpus(t *testing.T) []toolBody {
	var out []toolBody
	for _, f := range corpus.Files(t) {
		out = append(out, toolBody{f.Name, string(corpus.Read(t, f))})
	}
	paths, err := filepath.Glob(filepath.Join("testdata", "tools", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no tool bodies: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, toolBody{filepath.Base(p), string(b)})
	}
	return out
}

// carriedNames are the names of the tools a body of format p holds when tools are lowered
// there: every function tool and the provider tools of p.
func carriedNames(tools []*compactorv1.Tool, p compactorv1.Provider) []string {
	var out, others []string
	for _, t := range tools {
		switch pt := t.GetProviderTool(); {
		case pt == nil:
			out = append(out, t.GetName())
		case pt.GetFormat() == p:
			others = append(others, t.GetName())
		}
	}
	if p == compactorv1.Provider_PROVIDER_GEMINI {
		slices.Sort(others) // toolNames gives them by member name
	}
	if p == compactorv1.Provider_PROVIDER_GEMINI || len(others) == 0 {
		return append(out, others...)
	}
	// Elsewhere in their order among the functions.
	out = out[:0]
	for _, t := range tools {
		if pt := t.GetProviderTool(); pt == nil || pt.GetFormat() == p {
			out = append(out, t.GetName())
		}
	}
	return out
}

// decodeAs decodes body into a T, failing the test when it cannot.
func decodeAs[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// toolNames decodes the tools of a lowered body with the SDK's types and returns their names
// (a Gemini provider tool by its member's name), function tools first for Gemini.
func toolNames(t *testing.T, p compactorv1.Provider, body string) []string {
	t.Helper()
	var out []string
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		v := decodeAs[anthropic.MessageNewParams](t, body)
		for _, tool := range v.Tools {
			out = append(out, *tool.GetName())
		}
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		v := decodeAs[openai.ChatCompletionNewParams](t, body)
		for _, tool := range v.Tools {
			if f := tool.GetFunction(); f != nil {
				out = append(out, f.Name)
			} else if c := tool.GetCustom(); c != nil {
				out = append(out, c.Name)
			}
		}
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		v := decodeAs[responses.ResponseNewParams](t, body)
		for _, tool := range v.Tools {
			if n := tool.GetName(); n != nil {
				out = append(out, *n)
			} else {
				out = append(out, *tool.GetType())
			}
		}
	case compactorv1.Provider_PROVIDER_GEMINI:
		v := decodeAs[struct{ Tools []genai.Tool }](t, body)
		var others []string
		for _, tool := range v.Tools {
			for _, d := range tool.FunctionDeclarations {
				out = append(out, d.Name)
			}
			b, _ := json.Marshal(tool)
			var m map[string]json.RawMessage
			_ = json.Unmarshal(b, &m)
			for k := range m {
				if k != "functionDeclarations" {
					others = append(others, k)
				}
			}
		}
		slices.Sort(others)
		out = append(out, others...)
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		tc, _, err := bedrockToolTypes(body)
		if err != nil || tc == nil {
			return nil
		}
		for _, tool := range tc.Tools {
			switch v := tool.(type) {
			case *types.ToolMemberToolSpec:
				out = append(out, *v.Value.Name)
			case *types.ToolMemberSystemTool:
				out = append(out, *v.Value.Name)
			}
		}
	}
	return out
}

// TestConformanceCheckerRejects makes sure the checks above can fail: each body carries one
// thing the SDK would not recognize.
func TestConformanceCheckerRejects(t *testing.T) {
	bad := []struct {
		p    compactorv1.Provider
		body string
	}{
		{compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, `{"messages":[{"role":"user","content":[{"type":"txt","text":"x"}]}]}`},
		{compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, `{"messages":[{"role":"user","content":[{"type":"text","text":"x","bogus":1}]}]}`},
		{compactorv1.Provider_PROVIDER_OPENAI_CHAT, `{"messages":[{"role":"tool","tool_call_id":"a","name":"n","content":"x"}]}`},
		{compactorv1.Provider_PROVIDER_OPENAI_CHAT, `{"messages":[{"role":"user","content":[{"type":"image","url":"x"}]}]}`},
		{compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, `{"input":[{"role":"user","content":"x"}]}`},
		{compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, `{"input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]}]}`},
		{compactorv1.Provider_PROVIDER_GEMINI, `{"contents":[{"role":"user","parts":[{"text":"x","bogus":1}]}]}`},
		{compactorv1.Provider_PROVIDER_GEMINI, `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`},
		{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, `{"messages":[{"role":"user","content":[{"text":"x","image":{"format":"png","source":{"bytes":""}}}]}]}`},
		{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, `{"messages":[{"role":"user","content":[{"document":{"format":"pdf","name":"a.pdf","source":{"bytes":""}}}]}]}`},
		{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, `{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`},
		// Tools, tool choices and generation parameters.
		{compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, `{"messages":[],"tools":[{"type":"teleport_20990101","name":"x"}]}`},
		{compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, `{"messages":[],"tool_choice":{"type":"sometimes"}}`},
		{compactorv1.Provider_PROVIDER_OPENAI_CHAT, `{"messages":[],"tools":[{"type":"function","function":{"name":"f","input_schema":{}}}]}`},
		{compactorv1.Provider_PROVIDER_OPENAI_CHAT, `{"messages":[],"tool_choice":{"type":"function","function":{"name":"f","strict":true}}}`},
		{compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, `{"input":[],"tools":[{"type":"function","name":"f","parameters":{},"strict":false,"bogus":1}]}`},
		{compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, `{"input":[],"tool_choice":{"type":"function","function":{"name":"f"}}}`},
		{compactorv1.Provider_PROVIDER_GEMINI, `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"name":"f","input_schema":{}}]}]}`},
		{compactorv1.Provider_PROVIDER_GEMINI, `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"},"parametersJsonSchema":{}}]}]}`},
		{compactorv1.Provider_PROVIDER_GEMINI, `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"toolConfig":{"tools":[]}}`},
		{compactorv1.Provider_PROVIDER_GEMINI, `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"max_tokens":1}}`},
		{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, `{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[]}}`},
		{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, `{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f"}}]}}`},
		{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, `{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{}}},"cachePoint":{"type":"default"}}]}}`},
		{compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE, `{"messages":[{"role":"user","content":[{"text":"x"}]}],"inferenceConfig":{"max_tokens":1}}`},
	}
	for i, b := range bad {
		if conformanceErr(b.p, b.body) == nil {
			t.Errorf("case %d (%s): checker accepted %s", i, ProviderName(b.p), b.body)
		}
	}
}
