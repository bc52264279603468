package format

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

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

func conformanceErr(p compactorv1.Provider, body string) error {
	var err error
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		if strings.Contains(body, `"type":"compaction"`) { // a beta block: the beta API's params
			var v anthropic.BetaMessageNewParams
			err = sdkRoundTrip(body, &v, []string{"system", "messages"})
			break
		}
		var v anthropic.MessageNewParams
		err = sdkRoundTrip(body, &v, []string{"system", "messages"})
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		var v openai.ChatCompletionNewParams
		err = sdkRoundTrip(body, &v, []string{"messages"})
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		body, err = checkOutputMessages(body)
		if err != nil {
			break
		}
		var v responses.ResponseNewParams
		err = sdkRoundTrip(body, &v, []string{"input", "include"})
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
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil {
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
		System   json.RawMessage `json:"system"`
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil {
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
			t.Run(c.name+"/"+ProviderName(p), func(t *testing.T) { checkConformance(t, p, resp.GetBody()) })
		}
	}
}

// TestConformanceCorpus checks every real conversation, lowered to each format (Bedrock with
// and without toolConfig).
func TestConformanceCorpus(t *testing.T) {
	for _, f := range corpus.Files(t) {
		lifted, err := Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for _, p := range allProviders {
			for _, base := range []string{"", `{"toolConfig":{"tools":[]}}`} {
				resp, err := Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p, BaseBody: base})
				if err != nil {
					t.Fatalf("%s/%s: %v", f.Name, ProviderName(p), err)
				}
				t.Run(f.Name+"/"+ProviderName(p), func(t *testing.T) { checkConformance(t, p, resp.GetBody()) })
			}
		}
	}
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
	}
	for i, b := range bad {
		if conformanceErr(b.p, b.body) == nil {
			t.Errorf("case %d (%s): checker accepted %s", i, ProviderName(b.p), b.body)
		}
	}
}
