package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Provider is a fake LLM provider on loopback that speaks Anthropic Messages (POST
// /v1/messages), OpenAI Chat Completions (/v1/chat/completions) and OpenAI Responses
// (/v1/responses), and bills each request the usage the real provider would report, its
// prompt cache modelled by prefix (per model; tokens estimated at 4 bytes of JSON):
//
//   - Anthropic: the prefix (tools, system, the messages' content blocks) up to a
//     cache_control breakpoint, or up to 20 blocks before one, held since an earlier
//     request's breakpoint is a cache read; the rest up to the last breakpoint is a cache write (when it reaches 1024
//     tokens); what follows it is input.
//   - OpenAI: the longest prefix (tools, instructions, messages or input items) an earlier
//     request held, of 1024 tokens or more, is a cache read (cached_tokens, in steps of 128
//     past 1024); no writes are billed.
//
// Every call answers "SUMMARY-<n>: …"; Calls lists what each was billed.
type Provider struct {
	*httptest.Server
	anthropic, openAI *promptCache

	mu    sync.Mutex
	calls []Call
}

// Call is what the Provider billed one request.
type Call struct {
	// API is "anthropic", "chat" or "responses".
	API string
	// Model is the request's model.
	Model string
	// Input are the input tokens neither read from nor written to the cache; CacheRead and
	// CacheWrite those read and written; Output the completion's.
	Input, CacheRead, CacheWrite, Output int64
	// Final are the input tokens of the request's last message (Anthropic: its last content
	// block): of a summary request sent as the agent's own, the summary instruction.
	Final int64
}

// NewProvider starts a Provider closed when the test ends.
func NewProvider(tb testing.TB) *Provider {
	tb.Helper()
	p := StartProvider()
	tb.Cleanup(p.Close)
	return p
}

// StartProvider starts a Provider; the caller closes it.
func StartProvider() *Provider {
	p := &Provider{anthropic: newPromptCache(), openAI: newPromptCache()}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// Calls returns what each request was billed, in order of arrival.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// providerRequest is the part of a request body the fake reads; the prefix is read from the
// raw JSON.
type providerRequest struct {
	Model        string            `json:"model"`
	Tools        []json.RawMessage `json:"tools"`
	System       json.RawMessage   `json:"system"`
	Instructions json.RawMessage   `json:"instructions"`
	Messages     []json.RawMessage `json:"messages"`
	Input        json.RawMessage   `json:"input"`
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	api := ""
	switch {
	case r.Method != http.MethodPost:
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		api = "anthropic"
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		api = "chat"
	case strings.HasSuffix(r.URL.Path, "/responses"):
		api = "responses"
	}
	if api == "" {
		http.NotFound(w, r)
		return
	}
	req, _, ok := readJSON[providerRequest](w, r)
	if !ok {
		return
	}
	es := elements(prefixValues(api, req))
	var u usage
	if api == "anthropic" {
		u = p.anthropic.anthropic(req.Model, es)
	} else {
		u = p.openAI.openAI(req.Model, es)
	}
	p.mu.Lock()
	n := len(p.calls) + 1
	text := fmt.Sprintf("SUMMARY-%d: the user asked for the tasks quoted above; next step: continue.", n)
	c := Call{API: api, Model: req.Model, Input: u.input, CacheRead: u.cacheRead, CacheWrite: u.cacheWrite, Output: int64(len(text)+3) / 4}
	if k := len(es); k > 0 {
		c.Final = es[k-1].tokens
		if k > 1 {
			c.Final -= es[k-2].tokens
		}
	}
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer(api, n, text, c))
}

// prefixValues returns the JSON values of req's prefix, in the order the provider caches
// them: tools, then the system prompt or instructions, then the messages or input items.
func prefixValues(api string, req providerRequest) []any {
	var vs []any
	add := func(raw json.RawMessage) {
		var v any
		if len(raw) > 0 && json.Unmarshal(raw, &v) == nil && v != nil {
			vs = append(vs, v)
		}
	}
	addAll := func(raw json.RawMessage) { // a string, or an array of values each its own element
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) == nil {
			for _, a := range arr {
				add(a)
			}
			return
		}
		add(raw)
	}
	for _, t := range req.Tools {
		add(t)
	}
	switch api {
	case "anthropic":
		var sys string
		if json.Unmarshal(req.System, &sys) == nil {
			vs = append(vs, map[string]any{"type": "text", "text": sys})
		} else {
			addAll(req.System)
		}
	case "responses":
		add(req.Instructions)
		addAll(req.Input)
	}
	for _, m := range req.Messages {
		add(m)
	}
	if api == "anthropic" {
		return anthropicBlocks(vs)
	}
	return vs
}

// anthropicBlocks splits Anthropic messages into their content blocks, each with its
// message's role and whether it opens the message: Anthropic caches by block, so a prefix
// ends at a block whether or not its message goes on. A string content is the one text block
// it stands for.
func anthropicBlocks(vs []any) []any {
	out := make([]any, 0, len(vs))
	for _, v := range vs {
		m, ok := v.(map[string]any)
		if !ok || m["role"] == nil {
			out = append(out, v)
			continue
		}
		blocks, ok := m["content"].([]any)
		if s, isText := m["content"].(string); isText {
			blocks, ok = []any{map[string]any{"type": "text", "text": s}}, true
		}
		if !ok {
			out = append(out, v)
			continue
		}
		for j, b := range blocks {
			out = append(out, map[string]any{"role": m["role"], "opens": j == 0, "block": b})
		}
	}
	return out
}

// answer is the response body of call n of api.
func answer(api string, n int, text string, c Call) map[string]any {
	total := c.Input + c.CacheRead + c.CacheWrite
	switch api {
	case "anthropic":
		return map[string]any{
			"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": c.Model,
			"content":     []any{map[string]any{"type": "text", "text": text}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": c.Input, "output_tokens": c.Output,
				"cache_read_input_tokens": c.CacheRead, "cache_creation_input_tokens": c.CacheWrite},
		}
	case "responses":
		return map[string]any{
			"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1, "status": "completed", "model": c.Model,
			"output": []any{map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", n), "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}},
			"usage": map[string]any{"input_tokens": total, "input_tokens_details": map[string]any{"cached_tokens": c.CacheRead},
				"output_tokens": c.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": total + c.Output},
		}
	}
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": c.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": total, "completion_tokens": c.Output, "total_tokens": total + c.Output,
			"prompt_tokens_details": map[string]any{"cached_tokens": c.CacheRead}},
	}
}
