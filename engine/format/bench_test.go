package format

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/genai"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/cputime"
)

// Benchmarks run over the whole real corpus per operation, so b.SetBytes gives MB/s of
// request body. Each format's Lower runs side by side with encoding/json's Marshal of an
// equivalent typed output struct (prepared outside the timer), and Lift side by side with
// json.Unmarshal of the same body into typed structs:
//
//	go test ./engine/format -run '^$' -bench . -benchmem
//
// Besides wall-clock MB/s, each benchmark reports cpu-MB/s: bytes per second of process CPU
// time (user + system, GC included), which stays meaningful when the machine is shared and
// loaded and wall time mostly measures waiting.
//
// Baseline structs: Anthropic and OpenAI Chat are typed field for field (the corpus formats);
// Gemini uses google.golang.org/genai's Content; Bedrock the strict Converse structs of the
// conformance test; Responses items are typed with content/output as json.RawMessage.

type benchConv struct {
	name  string
	body  string // the corpus file
	raw   []byte // the same bytes, for encoding/json
	msgs  []*compactorv1.Message
	chat  bool
	lower map[compactorv1.Provider]string
}

func loadBench(b *testing.B) []benchConv {
	b.Helper()
	var out []benchConv
	for _, f := range corpus.Files(b) {
		body := string(corpus.Read(b, f))
		l, err := Lift(&compactorv1.LiftRequest{Body: body})
		if err != nil {
			b.Fatal(err)
		}
		c := benchConv{name: f.Name, body: body, raw: []byte(body), msgs: l.GetMessages(), chat: f.Format == "openai", lower: map[compactorv1.Provider]string{}}
		for _, p := range allProviders {
			r, err := Lower(&compactorv1.LowerRequest{Messages: c.msgs, Provider: p, BaseBody: `{"toolConfig":{"tools":[]}}`})
			if err != nil {
				b.Fatal(err)
			}
			c.lower[p] = r.GetBody()
		}
		out = append(out, c)
	}
	return out
}

// Typed output structs for the encoding/json baseline.
type (
	chatBody struct {
		ToolConfig json.RawMessage `json:"toolConfig,omitempty"`
		Messages   []chatMsg       `json:"messages"`
	}
	chatMsg struct {
		Role       string         `json:"role"`
		Content    chatContent    `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	// chatContent is a string, null or an array of text parts.
	chatContent struct {
		Text  *string
		Parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
	}
	antBody struct {
		ToolConfig json.RawMessage `json:"toolConfig,omitempty"`
		System     antContent      `json:"system"`
		Messages   []antMsg        `json:"messages"`
	}
	antMsg struct {
		Role    string     `json:"role"`
		Content antContent `json:"content"`
	}
	// antContent is a string or a block array, as Anthropic allows.
	antContent struct {
		Text   *string
		Blocks []antBlock
	}
	antBlock struct {
		Type         string          `json:"type"`
		Text         *string         `json:"text,omitempty"`
		ID           string          `json:"id,omitempty"`
		Name         string          `json:"name,omitempty"`
		Input        json.RawMessage `json:"input,omitempty"`
		ToolUseID    string          `json:"tool_use_id,omitempty"`
		Content      antContent      `json:"content,omitzero"`
		IsError      bool            `json:"is_error,omitempty"`
		CacheControl *struct {
			Type string `json:"type"`
		} `json:"cache_control,omitempty"`
	}
	respBody struct {
		ToolConfig json.RawMessage `json:"toolConfig,omitempty"`
		Input      []respItem      `json:"input"`
	}
	respItem struct {
		Type      string          `json:"type"`
		Role      string          `json:"role,omitempty"`
		Content   json.RawMessage `json:"content,omitempty"`
		CallID    string          `json:"call_id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments string          `json:"arguments,omitempty"`
		Output    json.RawMessage `json:"output,omitempty"`
	}
	geminiBody struct {
		ToolConfig        json.RawMessage  `json:"toolConfig,omitempty"`
		SystemInstruction *genai.Content   `json:"systemInstruction,omitempty"`
		Contents          []*genai.Content `json:"contents"`
	}
	bedrockBody struct {
		ToolConfig json.RawMessage `json:"toolConfig,omitempty"`
		System     []brSystemBlock `json:"system,omitempty"`
		Messages   []brMessage     `json:"messages"`
	}
)

func (c antContent) IsZero() bool { return c.Text == nil && c.Blocks == nil }

func (c antContent) MarshalJSON() ([]byte, error) {
	if c.Text != nil {
		return json.Marshal(*c.Text)
	}
	return json.Marshal(c.Blocks)
}

func (c *antContent) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		c.Text = new(string)
		return json.Unmarshal(b, c.Text)
	}
	return json.Unmarshal(b, &c.Blocks)
}

func (c chatContent) MarshalJSON() ([]byte, error) {
	switch {
	case c.Text != nil:
		return json.Marshal(*c.Text)
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	}
	return []byte("null"), nil
}

func (c *chatContent) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		c.Text = new(string)
		return json.Unmarshal(b, c.Text)
	case len(b) > 0 && b[0] == '[':
		return json.Unmarshal(b, &c.Parts)
	}
	return nil
}

// Marshal-side twins of the Anthropic and Chat structs: the polymorphic content (string or
// array) is an interface holding the typed value, the plain encoding/json way, so Marshal
// needs no custom (re-validated) MarshalJSON.
type (
	antBodyOut struct {
		ToolConfig json.RawMessage `json:"toolConfig,omitempty"`
		System     any             `json:"system,omitempty"`
		Messages   []antMsgOut     `json:"messages"`
	}
	antMsgOut struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	antBlockOut struct {
		Type         string          `json:"type"`
		Text         *string         `json:"text,omitempty"`
		ID           string          `json:"id,omitempty"`
		Name         string          `json:"name,omitempty"`
		Input        json.RawMessage `json:"input,omitempty"`
		ToolUseID    string          `json:"tool_use_id,omitempty"`
		Content      any             `json:"content,omitempty"`
		IsError      bool            `json:"is_error,omitempty"`
		CacheControl *struct {
			Type string `json:"type"`
		} `json:"cache_control,omitempty"`
	}
	chatBodyOut struct {
		ToolConfig json.RawMessage `json:"toolConfig,omitempty"`
		Messages   []chatMsgOut    `json:"messages"`
	}
	chatMsgOut struct {
		Role       string         `json:"role"`
		Content    any            `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
)

func (c antContent) out() any {
	if c.Text != nil {
		return *c.Text
	}
	if c.Blocks == nil {
		return nil
	}
	out := make([]antBlockOut, len(c.Blocks))
	for i, b := range c.Blocks {
		out[i] = antBlockOut{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name, Input: b.Input,
			ToolUseID: b.ToolUseID, Content: b.Content.out(), IsError: b.IsError, CacheControl: b.CacheControl}
	}
	return out
}

func (a *antBody) out() *antBodyOut {
	o := &antBodyOut{ToolConfig: a.ToolConfig, System: a.System.out()}
	for _, m := range a.Messages {
		o.Messages = append(o.Messages, antMsgOut{Role: m.Role, Content: m.Content.out()})
	}
	return o
}

func (c *chatBody) out() *chatBodyOut {
	o := &chatBodyOut{ToolConfig: c.ToolConfig}
	for _, m := range c.Messages {
		var content any
		switch {
		case m.Content.Text != nil:
			content = *m.Content.Text
		case m.Content.Parts != nil:
			content = m.Content.Parts
		}
		o.Messages = append(o.Messages, chatMsgOut{Role: m.Role, Content: content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
	}
	return o
}

// baseline decodes a lowered body into its typed struct.
func baseline(b *testing.B, p compactorv1.Provider, body string) any {
	var v any
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES:
		v = &antBody{}
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		v = &chatBody{}
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		v = &respBody{}
	case compactorv1.Provider_PROVIDER_GEMINI:
		v = &geminiBody{}
	case compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		v = &bedrockBody{}
	}
	if err := strictDecode([]byte(body), v); err != nil {
		b.Fatalf("%s baseline struct does not hold the body: %v", ProviderName(p), err)
	}
	var out any = v
	switch t := v.(type) {
	case *antBody:
		out = t.out()
	case *chatBody:
		out = t.out()
	}
	// The struct must marshal to the same JSON value as the body it stands for.
	m, err := json.Marshal(out)
	if err != nil {
		b.Fatal(err)
	}
	var x, y any
	// (genai omits an empty "args" object; that is the only difference tolerated.)
	if json.Unmarshal(m, &x) != nil || json.Unmarshal([]byte(body), &y) != nil || !reflect.DeepEqual(dropEmptyObjects(x), dropEmptyObjects(y)) {
		b.Fatalf("%s baseline struct marshals to a different body: %s", ProviderName(p), firstJSONDiff(x, y, "body"))
	}
	return out
}

// cpuMetric runs the benchmark loop body and reports cpu-MB/s for bytes per operation.
func cpuMetric(b *testing.B, bytes int, body func()) {
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	start := cputime.Process()
	n := 0
	for b.Loop() {
		body()
		n++
	}
	if cpu := cputime.Process() - start; cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(n)/cpu.Seconds()/1e6, "cpu-MB/s")
	}
}

func BenchmarkLower(b *testing.B) {
	convs := loadBench(b)
	for _, p := range allProviders {
		total := 0
		for _, c := range convs {
			total += len(c.lower[p])
		}
		b.Run(ProviderName(p)+"/format.Lower", func(b *testing.B) {
			cpuMetric(b, total, func() {
				for _, c := range convs {
					if _, err := Lower(&compactorv1.LowerRequest{Messages: c.msgs, Provider: p, BaseBody: `{"toolConfig":{"tools":[]}}`}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		structs := make([]any, len(convs))
		for i, c := range convs {
			structs[i] = baseline(b, p, c.lower[p])
		}
		b.Run(ProviderName(p)+"/json.Marshal", func(b *testing.B) {
			cpuMetric(b, total, func() {
				for _, s := range structs {
					if _, err := json.Marshal(s); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func BenchmarkLift(b *testing.B) {
	convs := loadBench(b)
	for _, chat := range []bool{false, true} {
		name, total := "anthropic", 0
		if chat {
			name = "openai-chat"
		}
		var set []benchConv
		for _, c := range convs {
			if c.chat == chat {
				set = append(set, c)
				total += len(c.body)
			}
		}
		b.Run(name+"/format.Lift", func(b *testing.B) {
			cpuMetric(b, total, func() {
				for _, c := range set {
					if _, err := Lift(&compactorv1.LiftRequest{Body: c.body}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run(name+"/json.Unmarshal", func(b *testing.B) {
			cpuMetric(b, total, func() {
				for _, c := range set {
					var err error
					if chat {
						var v chatBody
						err = json.Unmarshal(c.raw, &v)
					} else {
						var v struct {
							antBody
							Tools json.RawMessage `json:"tools"`
						}
						err = json.Unmarshal(c.raw, &v)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// firstJSONDiff names the first place two decoded JSON values differ.
func firstJSONDiff(a, b any, path string) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return path
		}
		for k := range av {
			if !reflect.DeepEqual(av[k], bv[k]) {
				return firstJSONDiff(av[k], bv[k], path+"."+k)
			}
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				return path + "." + k + " (missing)"
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(bv) != len(av) {
			return path + " (length)"
		}
		for i := range av {
			if !reflect.DeepEqual(av[i], bv[i]) {
				return firstJSONDiff(av[i], bv[i], path+"["+itoa(i)+"]")
			}
		}
	}
	return fmt.Sprintf("%s: %.200v vs %.200v", path, a, b)
}

// dropEmptyObjects removes members whose value is an empty object.
func dropEmptyObjects(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if m, ok := e.(map[string]any); ok && len(m) == 0 {
				delete(t, k)
				continue
			}
			t[k] = dropEmptyObjects(e)
		}
	case []any:
		for i := range t {
			t[i] = dropEmptyObjects(t[i])
		}
	}
	return v
}

// BenchmarkLowerLoadTest lowers the load test's request to every format: the first 20
// messages of its SWE-agent conversation, with no base body (so Bedrock sends the tool
// calls and results as text).
func BenchmarkLowerLoadTest(b *testing.B) {
	f := corpus.Named(b, corpus.LoadTestConversation)
	l, err := Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(b, f))})
	if err != nil {
		b.Fatal(err)
	}
	msgs := l.GetMessages()[:20]
	for _, p := range allProviders {
		b.Run(ProviderName(p), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: p, Model: "m"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
