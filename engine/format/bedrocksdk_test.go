package format

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go/auth/bearer"
)

// Bedrock bodies are checked with aws-sdk-go-v2's bedrockruntime client itself, in process
// (its HTTP client is a function; nothing leaves the process): each message of the body is
// read by the SDK's own deserializer (as the message of a Converse response) into
// types.Message, which must hold no types.UnknownUnionMember; the messages and the system
// blocks are then sent through Converse, so the SDK validates the input (its required
// members) and serializes it; the request it would send must equal the body's conversation
// member for member (a member the SDK does not know would be missing).

// bedrockDoer is the SDK client's HTTP client: it answers every request with reply and
// keeps the body of the request.
type bedrockDoer struct{ reply, sent []byte }

func (d *bedrockDoer) Do(r *http.Request) (*http.Response, error) {
	var err error
	if r.Body != nil {
		d.sent, err = io.ReadAll(r.Body)
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(d.reply)), Request: r}, err
}

func checkBedrockSDK(body string) error {
	var top struct {
		System   []json.RawMessage `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		return err
	}
	d := &bedrockDoer{}
	client := bedrockruntime.New(bedrockruntime.Options{Region: "us-east-1", HTTPClient: d,
		Credentials: aws.AnonymousCredentials{}, BearerAuthTokenProvider: bearer.StaticTokenProvider{Token: bearer.Token{Value: "test"}},
		BaseEndpoint: aws.String("https://bedrock.invalid"), RetryMaxAttempts: 1})
	ctx := context.Background()
	probe := &bedrockruntime.ConverseInput{ModelId: aws.String("m"), Messages: []types.Message{
		{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "x"}}}}}
	msgs := make([]types.Message, len(top.Messages))
	for i, raw := range top.Messages {
		d.reply = []byte(`{"output":{"message":` + string(raw) + `},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2},"metrics":{"latencyMs":1}}`)
		out, err := client.Converse(ctx, probe)
		if err != nil {
			return fmt.Errorf("messages[%d]: the SDK does not read it: %w", i, err)
		}
		m, ok := out.Output.(*types.ConverseOutputMemberMessage)
		if !ok {
			return fmt.Errorf("messages[%d]: the SDK read no message", i)
		}
		if p := unknownMember(reflect.ValueOf(m.Value), fmt.Sprintf("messages[%d]", i)); p != "" {
			return fmt.Errorf("%s: a block the SDK does not know", p)
		}
		msgs[i] = m.Value
	}
	var sys []types.SystemContentBlock
	for i, raw := range top.System {
		var b struct {
			Text       *string `json:"text"`
			CachePoint *struct {
				Type string `json:"type"`
			} `json:"cachePoint"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return err
		}
		switch {
		case b.Text != nil:
			sys = append(sys, &types.SystemContentBlockMemberText{Value: *b.Text})
		case b.CachePoint != nil:
			sys = append(sys, &types.SystemContentBlockMemberCachePoint{Value: types.CachePointBlock{Type: types.CachePointType(b.CachePoint.Type)}})
		default:
			return fmt.Errorf("system[%d]: neither text nor cachePoint", i)
		}
	}
	tc, ic, err := bedrockToolTypes(body)
	if err != nil {
		return err
	}
	d.reply = []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2},"metrics":{"latencyMs":1}}`)
	if _, err := client.Converse(ctx, &bedrockruntime.ConverseInput{ModelId: aws.String("m"), Messages: msgs, System: sys,
		ToolConfig: tc, InferenceConfig: ic}); err != nil {
		return fmt.Errorf("the SDK refuses the request: %w", err)
	}
	var ours, theirs struct {
		System          any `json:"system"`
		Messages        any `json:"messages"`
		ToolConfig      any `json:"toolConfig"`
		InferenceConfig any `json:"inferenceConfig"`
	}
	if err := json.Unmarshal([]byte(body), &ours); err != nil {
		return err
	}
	if err := json.Unmarshal(d.sent, &theirs); err != nil {
		return fmt.Errorf("the SDK's request: %w", err)
	}
	if !reflect.DeepEqual(ours, theirs) {
		return fmt.Errorf("the SDK sends another conversation than the body's:\nours:   %.1500s\ntheirs: %.1500s", mustJSON(ours), mustJSON(theirs))
	}
	return nil
}

// bedrockToolTypes builds the SDK's ToolConfiguration and InferenceConfiguration from the
// body's toolConfig and inferenceConfig (nil when absent), member by member, so that the SDK
// validates and serializes them.
func bedrockToolTypes(body string) (*types.ToolConfiguration, *types.InferenceConfiguration, error) {
	var top struct {
		ToolConfig      *brToolConfig `json:"toolConfig"`
		InferenceConfig *brInference  `json:"inferenceConfig"`
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		return nil, nil, err
	}
	var ic *types.InferenceConfiguration
	if c := top.InferenceConfig; c != nil {
		ic = &types.InferenceConfiguration{MaxTokens: c.MaxTokens, StopSequences: c.StopSequences, Temperature: c.Temperature, TopP: c.TopP}
	}
	c := top.ToolConfig
	if c == nil {
		return nil, ic, nil
	}
	tc := &types.ToolConfiguration{}
	for _, t := range c.Tools {
		switch {
		case t.ToolSpec != nil:
			var schema any
			if err := json.Unmarshal(t.ToolSpec.InputSchema.JSON, &schema); err != nil {
				return nil, nil, err
			}
			tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: types.ToolSpecification{Name: aws.String(t.ToolSpec.Name),
				Description: t.ToolSpec.Description, Strict: t.ToolSpec.Strict,
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)}}})
		case t.CachePoint != nil:
			tc.Tools = append(tc.Tools, &types.ToolMemberCachePoint{Value: types.CachePointBlock{Type: types.CachePointType(t.CachePoint.Type)}})
		case t.SystemTool != nil:
			tc.Tools = append(tc.Tools, &types.ToolMemberSystemTool{Value: types.SystemTool{Name: aws.String(t.SystemTool.Name)}})
		}
	}
	if ch := c.ToolChoice; ch != nil {
		switch {
		case ch.Auto != nil:
			tc.ToolChoice = &types.ToolChoiceMemberAuto{}
		case ch.Any != nil:
			tc.ToolChoice = &types.ToolChoiceMemberAny{}
		case ch.Tool != nil:
			tc.ToolChoice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(ch.Tool.Name)}}
		}
	}
	return tc, ic, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// unknownMember returns the path of a types.UnknownUnionMember inside v, or "".
func unknownMember(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		if _, ok := v.Interface().(*types.UnknownUnionMember); ok {
			return path
		}
		return unknownMember(v.Elem(), path)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return ""
		}
		for i := range v.Len() {
			if p := unknownMember(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				if p := unknownMember(v.Field(i), path+"."+v.Type().Field(i).Name); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

// TestBedrockSDKCheckRejects makes sure the SDK check can fail by itself: an unknown member,
// an unknown block, a required member missing, a blob that is not base64.
func TestBedrockSDKCheckRejects(t *testing.T) {
	for _, body := range []string{
		`{"messages":[{"role":"user","content":[{"image":{"format":"png","source":{"bytes":"AAAA"},"bogus":1}}]}]}`,
		`{"messages":[{"role":"user","content":[{"hologram":{"x":1}}]}]}`,
		`{"messages":[{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","input":{}}}]}]}`,
		`{"messages":[{"role":"assistant","content":[{"reasoningContent":{"redactedContent":"not base64!"}}]}]}`,
	} {
		if err := checkBedrockSDK(body); err == nil {
			t.Errorf("the SDK check accepted %s", body)
		}
	}
	if err := checkBedrockSDK(`{"system":[{"text":"s"},{"cachePoint":{"type":"default"}}],"messages":[{"role":"user","content":[{"text":"x"}]}]}`); err != nil {
		t.Errorf("a plain body: %v", err)
	}
}
