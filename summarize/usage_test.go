package summarize

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
)

// testPrices is a price table for the tests (made-up figures, per million tokens).
var testPrices = Prices{{Model: "test-*", Input: 3, CacheRead: 0.3, CacheWrite: 3.75, Output: 15}}

// usageFixture is an LLM summarizer of kind against a llmtest.Provider, its spans recorded.
func usageFixture(t *testing.T, kind string, cfg SummarizerConfig) (*LLM, *llmtest.Provider, *tracetest.InMemoryExporter) {
	t.Helper()
	p := llmtest.NewProvider(t)
	exp := tracetest.NewInMemoryExporter()
	opt := Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Prices: testPrices}
	cfg.Name, cfg.Kind, cfg.Model, cfg.BaseURL = "test", kind, "test-model", baseURL(kind, p.URL)
	s, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*LLM), p, exp
}

// longMessages is a conversation of well over the providers' minimum cacheable prefix.
func longMessages() []*compactorv1.Message {
	msgs := testMessages()
	for i := range 40 {
		line := strings.Repeat("the build of pkg/x failed at step "+string(rune('a'+i%26))+"; ", 12)
		role := compactorv1.Role_ROLE_USER
		if i%2 == 1 {
			role = compactorv1.Role_ROLE_ASSISTANT
		}
		msgs = append(msgs, &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: line}}}}})
	}
	return msgs
}

// checkUsage holds res, the span and the Provider's bill of call n (1-based) to each other
// and to the price table.
func checkUsage(t *testing.T, res Result, p *llmtest.Provider, n int, exp *tracetest.InMemoryExporter) {
	t.Helper()
	bill := p.Calls()[n-1]
	if res.InputTokens != bill.Input+bill.CacheRead+bill.CacheWrite || res.CacheReadTokens != bill.CacheRead ||
		res.CacheWriteTokens != bill.CacheWrite || res.OutputTokens != bill.Output {
		t.Errorf("usage %+v, the provider billed %+v", res.Output, bill)
	}
	want := (float64(bill.Input)*3 + float64(bill.CacheRead)*0.3 + float64(bill.CacheWrite)*3.75 + float64(bill.Output)*15) / 1e6
	if math.Abs(res.Cost-want) > 1e-12 || want == 0 {
		t.Errorf("cost %g, want %g", res.Cost, want)
	}
	spans := exp.GetSpans().Snapshots()
	a := attrs(spans[len(spans)-1])
	for k, v := range map[string]int64{
		"gen_ai.usage.input_tokens": res.InputTokens, "gen_ai.usage.output_tokens": res.OutputTokens,
		"gen_ai.usage.cache_read.input_tokens": res.CacheReadTokens, "gen_ai.usage.cache_creation.input_tokens": res.CacheWriteTokens,
	} {
		if got, ok := a[attributeKey(k)]; !ok || got.AsInt64() != v {
			t.Errorf("span %s = %v, want %d", k, got.String(), v)
		}
	}
	if got := a[AttrCost].AsFloat64(); math.Abs(got-want) > 1e-12 {
		t.Errorf("span %s = %g, want %g", AttrCost, got, want)
	}
}

func TestOpenAIReportsCacheReads(t *testing.T) {
	for _, kind := range []string{KindOpenAI, KindOpenAIResponses} {
		t.Run(kind, func(t *testing.T) {
			s, p, exp := usageFixture(t, kind, SummarizerConfig{})
			req := Request{SummaryInput: engine.SummaryInput{Messages: longMessages()}}
			for n := 1; n <= 2; n++ {
				res, err := s.Summarize(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				checkUsage(t, res, p, n, exp)
				if got := res.CacheReadTokens > 0; got != (n == 2) {
					t.Errorf("call %d: cache read %d tokens, want reads only on the second call of the same prompt", n, res.CacheReadTokens)
				}
			}
		})
	}
}

func TestPrices(t *testing.T) {
	if _, ok := testPrices.Lookup("other", "test-model"); !ok {
		t.Error("the configured model's price is not found by its prefix row")
	}
	if _, ok := testPrices.Lookup("gpt-x"); ok {
		t.Error("a model the table does not name has a price")
	}
	for _, bad := range []Prices{{{Model: ""}}, {{Model: "*"}}, {{Model: "m", Input: -1}}, {{Model: "m", Output: math.NaN()}}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validates", bad)
		}
	}
}

func attributeKey(s string) attribute.Key { return attribute.Key(s) }

// agentSends sends msgs to p as the agent would, in f, with tools (an Anthropic breakpoint on
// the last message), and returns the bill.
func agentSends(t *testing.T, p *llmtest.Provider, f compactorv1.Provider, msgs []*compactorv1.Message, tools []*compactorv1.Tool) llmtest.Call {
	t.Helper()
	if f == compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES {
		msgs = append(msgs[:len(msgs)-1:len(msgs)-1], WithCacheBreakpoint(msgs[len(msgs)-1]))
	}
	low, err := format.Lower(&compactorv1.LowerRequest{Messages: msgs, Provider: f, Model: "test-model",
		BaseBody: `{"model":"test-model","max_tokens":100}`, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	path := map[compactorv1.Provider]string{compactorv1.Provider_PROVIDER_OPENAI_CHAT: "/v1/chat/completions",
		compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:   "/v1/responses",
		compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES: "/v1/messages"}[f]
	resp, err := http.Post(p.URL+path, "application/json", strings.NewReader(low.GetBody()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	calls := p.Calls()
	return calls[len(calls)-1]
}

// testAgentPrompt is the agent prompt of msgs cut before msgs[cut], each message counted at
// 4 bytes of its text a token.
func testAgentPrompt(ar *compactorv1.AgentRequest, msgs []*compactorv1.Message, cut int) *AgentPrompt {
	p := &AgentPrompt{Request: ar, Messages: msgs, Cut: cut}
	for _, m := range msgs {
		p.Tokens = append(p.Tokens, int64(len(engine.Transcript([]*compactorv1.Message{m}, engine.TranscriptOptions{})))/4)
	}
	return p
}

func TestAgentPrefixReadsTheAgentsCache(t *testing.T) {
	tools := []*compactorv1.Tool{{Name: "bash", Description: "run a command", InputSchemaJson: `{"type":"object","properties":{"cmd":{"type":"string"}}}`}}
	for _, tc := range []struct {
		kind   string
		format compactorv1.Provider
	}{
		{KindAnthropic, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES},
		{KindOpenAI, compactorv1.Provider_PROVIDER_OPENAI_CHAT},
		{KindOpenAIResponses, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			msgs := append([]*compactorv1.Message{{Role: compactorv1.Role_ROLE_SYSTEM, Parts: []*compactorv1.Part{
				{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "You are a coding agent."}}}}}}, longMessages()...)
			cut := len(msgs) - 4
			for _, agentCache := range []bool{false, true} {
				s, p, exp := usageFixture(t, tc.kind, SummarizerConfig{AgentCache: &agentCache})
				// The agent's turns: each request ends with the user's message after an
				// assistant's.
				for end := cut - 5; end <= len(msgs); end += 2 {
					agentSends(t, p, tc.format, msgs[:end], tools)
				}
				ar := &compactorv1.AgentRequest{Provider: tc.format, Model: "test-model", Tools: tools, BaseBody: `{"max_tokens":100,"stream":true}`}
				res, err := s.Summarize(context.Background(), Request{
					SummaryInput: engine.SummaryInput{Messages: msgs[1:cut]},
					Agent:        testAgentPrompt(ar, msgs, cut),
				})
				if err != nil {
					t.Fatal(err)
				}
				calls := p.Calls()
				checkUsage(t, res, p, len(calls), exp)
				spans := exp.GetSpans().Snapshots()
				if got := attrs(spans[len(spans)-1])[AttrAgentPrefix].AsBool(); got != agentCache {
					t.Errorf("agent_cache %v: span %s = %v", agentCache, AttrAgentPrefix, got)
				}
				full := res.InputTokens
				if agentCache && res.CacheReadTokens < full/2 {
					t.Errorf("as the agent's request: %d of %d input tokens read from the cache, want most", res.CacheReadTokens, full)
				}
				if !agentCache && res.CacheReadTokens != 0 {
					t.Errorf("own prompt: %d tokens read from the agent's cache", res.CacheReadTokens)
				}
			}
		})
	}
}

// TestResponsesAgentRequestKeepsPromptCacheKey: a Responses summary sent as the agent's own
// request is the agent's body lowered, its prompt_cache_key kept (OpenAI routes a request to
// the cache its key's requests wrote), with the summary's own bound, no streaming, not
// stored, and the summary instruction as the last input item.
func TestResponsesAgentRequestKeepsPromptCacheKey(t *testing.T) {
	fx := newFixture(t, provider{kind: KindOpenAIResponses}, SummarizerConfig{MaxOutputTokens: 555}, Options{}, reply{status: 200, text: "ok"})
	msgs := longMessages()
	ar := &compactorv1.AgentRequest{Provider: compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, Model: "test-model",
		BaseBody: `{"prompt_cache_key":"agent-7","stream":true,"max_output_tokens":100,"store":true}`}
	if _, err := fx.s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: msgs[:len(msgs)-2]},
		Agent: testAgentPrompt(ar, msgs[:len(msgs)-2], len(msgs)-2)}); err != nil {
		t.Fatal(err)
	}
	body := fx.f.bodies[0]
	if body["prompt_cache_key"] != "agent-7" || body["model"] != "test-model" || body["max_output_tokens"] != float64(555) ||
		body["store"] != false || body["stream"] != nil {
		t.Errorf("prompt_cache_key %v model %v max_output_tokens %v store %v stream %v, want agent-7 test-model 555 false absent",
			body["prompt_cache_key"], body["model"], body["max_output_tokens"], body["store"], body["stream"])
	}
	input, _ := body["input"].([]any)
	if len(input) != len(msgs)-1 {
		t.Fatalf("%d input items, want the agent's %d messages and the instruction", len(input), len(msgs)-2)
	}
	last, _ := json.Marshal(input[len(input)-1])
	if !strings.Contains(string(last), "[Compaction request, not from the user]") {
		t.Errorf("last input item %s is not the summary instruction", last)
	}
}

// TestAnthropicAgentRequestLeavesRoomForThinking: a summary sent as the agent's own Anthropic
// request keeps the agent's extended thinking (changing it would not read the agent's cached
// messages), so its max_tokens must exceed thinking.budget_tokens, as the Messages API
// requires, and leave the summary its own bound beyond it.
func TestAnthropicAgentRequestLeavesRoomForThinking(t *testing.T) {
	fx := newFixture(t, provider{kind: KindAnthropic}, SummarizerConfig{MaxOutputTokens: 555}, Options{}, reply{status: 200, text: "ok"})
	msgs := longMessages()
	ar := &compactorv1.AgentRequest{Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, Model: "test-model",
		BaseBody: `{"max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":16000}}`}
	if _, err := fx.s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: msgs[:len(msgs)-2]},
		Agent: testAgentPrompt(ar, msgs[:len(msgs)-2], len(msgs)-2)}); err != nil {
		t.Fatal(err)
	}
	body := fx.f.bodies[0]
	thinking, _ := body["thinking"].(map[string]any)
	if thinking["budget_tokens"] != float64(16000) || body["max_tokens"] != float64(16000+555) {
		t.Errorf("thinking %v, max_tokens %v; want the agent's thinking kept and max_tokens %d (its budget and the summary's)",
			body["thinking"], body["max_tokens"], 16000+555)
	}
}

// TestAgentRequestThatForcesAToolSendsTheOwnPrompt: an agent's body whose tool_choice forces a
// tool call would have the model answer the summary request with a call and no text, every
// time; the summarizer sends its own prompt instead, and one that lets the model choose stays
// the agent's request.
func TestAgentRequestThatForcesAToolSendsTheOwnPrompt(t *testing.T) {
	tools := []*compactorv1.Tool{{Name: "bash", Description: "run a command", InputSchemaJson: `{"type":"object","properties":{"cmd":{"type":"string"}}}`}}
	for _, tc := range []struct {
		kind   string
		format compactorv1.Provider
		choice string
		agent  bool
	}{
		{KindAnthropic, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, `{"type":"any"}`, false},
		{KindAnthropic, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, `{"type":"tool","name":"bash"}`, false},
		{KindAnthropic, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, `{"type":"auto"}`, true},
		{KindOpenAI, compactorv1.Provider_PROVIDER_OPENAI_CHAT, `"required"`, false},
		{KindOpenAI, compactorv1.Provider_PROVIDER_OPENAI_CHAT, `{"type":"function","function":{"name":"bash"}}`, false},
		{KindOpenAI, compactorv1.Provider_PROVIDER_OPENAI_CHAT, `"auto"`, true},
		{KindOpenAI, compactorv1.Provider_PROVIDER_OPENAI_CHAT, `null`, true},
		{KindOpenAIResponses, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, `"required"`, false},
		{KindOpenAIResponses, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, `{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"bash"}]}`, false},
		{KindOpenAIResponses, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, `{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"bash"}]}`, true},
	} {
		t.Run(tc.kind+" "+tc.choice, func(t *testing.T) {
			fx := newFixture(t, provider{kind: tc.kind}, SummarizerConfig{}, Options{}, reply{status: 200, text: "ok"})
			msgs := longMessages()
			ar := &compactorv1.AgentRequest{Provider: tc.format, Model: "test-model", Tools: tools, BaseBody: `{"tool_choice":` + tc.choice + `}`}
			if _, err := fx.s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: msgs[:len(msgs)-2]},
				Agent: testAgentPrompt(ar, msgs[:len(msgs)-2], len(msgs)-2)}); err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(fx.f.bodies[0])
			if agent := strings.Contains(string(body), "[Compaction request, not from the user]"); agent != tc.agent {
				t.Errorf("sent as the agent's request: %v, want %v", agent, tc.agent)
			}
		})
	}
}

// TestAgentRequestReadsTheAgentsLatestRequest: an Anthropic summary request sent as the
// agent's own ends where the agent's latest request ended, its breakpoint where that
// request's was, so that request is read whole and nothing is written, even when no request
// of the agent ended near the cut (the first request after a compaction sends the messages
// the compaction kept, and the next cut falls among them); the messages after the cut it
// sends are named in the instruction as staying verbatim. Before any request of the agent
// (no assistant message) there is nothing to read: the summarizer sends its own prompt. An
// OpenAI request ends at the cut.
func TestAgentRequestReadsTheAgentsLatestRequest(t *testing.T) {
	msgs := longMessages()[3:] // u a u a … a: the agent's last request ended before the last a
	last := len(msgs) - 1      // the assistant's answer to it, which no request sent
	for _, tc := range []struct {
		name   string
		kind   string
		format compactorv1.Provider
		msgs   []*compactorv1.Message
		sent   int // the agent's one request: msgs[:sent] (0: none)
		cut    int
		// what the summary request sends of msgs, before its instruction (-1: its own prompt)
		want int
	}{
		{"anthropic cut far before the agent's request end", KindAnthropic, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, msgs, last, 9, last},
		{"anthropic cut after the agent's request end", KindAnthropic, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, msgs, last, len(msgs), len(msgs)},
		{"anthropic before any request", KindAnthropic, compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, msgs[:1], 0, 1, -1},
		{"openai before any request", KindOpenAI, compactorv1.Provider_PROVIDER_OPENAI_CHAT, msgs[:1], 0, 1, -1},
		{"openai chat", KindOpenAI, compactorv1.Provider_PROVIDER_OPENAI_CHAT, msgs, last, 9, 9},
		{"openai responses", KindOpenAIResponses, compactorv1.Provider_PROVIDER_OPENAI_RESPONSES, msgs, last, 9, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, p, _ := usageFixture(t, tc.kind, SummarizerConfig{})
			var agent llmtest.Call
			if tc.sent > 0 {
				agent = agentSends(t, p, tc.format, tc.msgs[:tc.sent], nil)
			}
			ap := testAgentPrompt(&compactorv1.AgentRequest{Provider: tc.format, Model: "test-model"}, tc.msgs, tc.cut)
			body, ok := s.agentBody(Request{Agent: ap}, 100)
			if !ok || tc.want < 0 {
				if ok != (tc.want >= 0) {
					t.Fatalf("sent as the agent's request: %v, want %v", ok, tc.want >= 0)
				}
				return
			}
			low, err := format.Lift(&compactorv1.LiftRequest{Body: string(body), Provider: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			got, want := low.GetMessages(), tc.want+1
			if tc.format == compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES && tc.msgs[tc.want-1].GetRole() == compactorv1.Role_ROLE_USER {
				want-- // Anthropic: the instruction is a block of the same user message
			}
			if len(got) != want {
				t.Fatalf("the request sends %d messages, want %d with the instruction", len(got), want)
			}
			if reserve := ap.MaxInputTokens(); reserve < ap.tokens(tc.want) {
				t.Errorf("MaxInputTokens %d, less than the %d tokens the request sends", reserve, ap.tokens(tc.want))
			}
			instruction := engine.Transcript(got[len(got)-1:], engine.TranscriptOptions{})
			if after := tc.want - tc.cut; after > 0 != strings.Contains(instruction, fmt.Sprintf("its last %d messages", after)) {
				t.Errorf("%d messages after the cut sent; the instruction says: %s", after, instruction)
			}
			if _, err := s.Summarize(context.Background(), Request{SummaryInput: engine.SummaryInput{Messages: tc.msgs[:tc.cut]}, Agent: ap}); err != nil {
				t.Fatal(err)
			}
			calls := p.Calls()
			bill := calls[len(calls)-1]
			if bill.CacheWrite != 0 {
				t.Errorf("the summary request wrote %d tokens to the cache (read %d)", bill.CacheWrite, bill.CacheRead)
			}
			if whole := agent.Input + agent.CacheRead + agent.CacheWrite; tc.format == compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES && tc.sent > 0 && bill.CacheRead != whole {
				t.Errorf("the summary request read %d tokens of the agent's request's %d", bill.CacheRead, whole)
			}
		})
	}
}

// TestAgentInstructionNamesKeptRequests: the instruction after the agent's own request names
// the requests kept verbatim by the start of the user's words and does not repeat them: they
// are in the conversation above it, read from the cache, while the instruction is billed in
// full. Each opening tells its request from every other user message (a host's block before
// the words is left out, and an opening grows past openingRunes where another message starts
// alike); a request another message starts with in full is quoted whole.
func TestAgentInstructionNamesKeptRequests(t *testing.T) {
	reminder := "<system-reminder>\nAs you answer the user's questions, you can use the following context: the project uses pnpm.\n</system-reminder>\n"
	long := "Port the word counter to Rust. " + strings.Repeat("Keep the CLI flags as they are and match the output byte for byte. ", 20)
	same := "Please update the changelog for the release, then bump the version in package.json to "
	for _, tc := range []struct {
		name    string
		kept    []string // the kept requests, in the conversation in this order
		others  []string // summarized user messages after them
		named   []string // the openings the instruction gives
		quoted  []string // text quoted whole
		missing []string // text the instruction must not hold
	}{
		{"a long request", []string{long}, nil, []string{"Port the word counter to Rust. Keep the CLI flags as they ar"}, nil, []string{"match the output byte for byte"}},
		{"host blocks first", []string{reminder + "Add a dark mode toggle to the settings page.", reminder + "Now add tests for it."}, nil,
			[]string{"Add a dark mode toggle to the settings page.", "Now add tests for it."}, nil, []string{"[user]", "system-reminder"}},
		{"alike for longer than an opening", []string{same + "2.0.0 and tag it."}, []string{same + "2.1.0 instead."},
			[]string{same + "2.0.0 and tag it."}, nil, nil},
		{"another starts with it all", []string{"run the tests"}, []string{"run the tests again, with -race this time"},
			nil, []string{"<kept>\n[user]\nrun the tests\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var msgs, kept []*compactorv1.Message
			for _, k := range tc.kept {
				m := irtest.User(k)
				msgs, kept = append(msgs, m, irtest.Assistant("On it.")), append(kept, m)
			}
			for _, o := range tc.others {
				msgs = append(msgs, irtest.User(o), irtest.Assistant("Done."))
			}
			msgs = append(msgs, irtest.User("what next?"))
			p := testAgentPrompt(nil, msgs, len(msgs)-1)
			p.Kept = kept
			got := agentInstruction(p, 1, "")
			for _, o := range tc.named {
				if !strings.Contains(got, fmt.Sprintf("- the one that begins %q\n", o)) {
					t.Errorf("no opening %q in:\n%s", o, got)
				}
			}
			if n := strings.Count(got, "- the one that begins"); n != len(tc.named) {
				t.Errorf("%d openings, want %d:\n%s", n, len(tc.named), got)
			}
			for _, q := range tc.quoted {
				if !strings.Contains(got, q) {
					t.Errorf("%q not quoted whole in:\n%s", q, got)
				}
			}
			for _, m := range tc.missing {
				if strings.Contains(got[strings.Index(got, "These user requests"):], m) {
					t.Errorf("the instruction holds %q:\n%s", m, got)
				}
			}
		})
	}
}
