// Package llmtest runs a local HTTP server speaking the OpenAI chat completions, the OpenAI
// Responses and the Anthropic Messages wire protocols, for tests of compactord's LLM summarizers through the
// official SDKs. It counts calls, records request bodies and prompts, holds every request to
// an input bound, and answers as scripted.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactord/compactord/engine/tokenizer"
)

// Reply answers call n (1-based): a status other than 0 or 200 is sent as an OpenAI error
// response; otherwise text is the completion.
type Reply func(n int64) (status int, text string)

// Server is a fake OpenAI-compatible chat completions and Responses server on loopback. Point a
// summarizer at URL + "/v1".
type Server struct {
	*httptest.Server
	calls atomic.Int64

	tb      testing.TB
	mu      sync.Mutex
	bodies  []string
	prompts []string
	reply   Reply
	replyTo PromptReply
	delay   time.Duration
	arrived chan struct{}
	release chan struct{}
	bound   int // most input tokens a request may have; 0: none
	largest int // most input tokens a request had
}

// PromptReply answers call n (1-based) given its prompt (see Prompt), as Reply does.
type PromptReply func(n int64, prompt string) (status int, text string)

// NewOpenAI starts a server that answers every call with "SUMMARY-<n>: …" until scripted
// otherwise. It is closed when the test ends.
func NewOpenAI(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

// NewAnthropic is NewOpenAI: the server speaks the three protocols (POST …/chat/completions,
// …/responses and …/v1/messages). Point an Anthropic summarizer at URL.
func NewAnthropic(tb testing.TB) *Server { return NewOpenAI(tb) }

// MaxInput makes the server hold every following request to at most tokens input tokens
// (o200k_base tokens of its system and user texts): a request over it fails the test.
func (s *Server) MaxInput(tokens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bound = tokens
}

// Largest returns the most input tokens (as MaxInput counts them) a request had.
func (s *Server) Largest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.largest
}

// ScriptPrompt is Script with a reply that reads the prompt.
func (s *Server) ScriptPrompt(reply PromptReply, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply, s.replyTo, s.delay = nil, reply, delay
}

// Prompt returns the system and user texts of call n (1-based), joined by a new line, or "".
func (s *Server) Prompt(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 1 || n > len(s.prompts) {
		return ""
	}
	return s.prompts[n-1]
}

// Calls returns how many completion requests arrived.
func (s *Server) Calls() int64 { return s.calls.Load() }

// Script sets how the server answers from now on: reply (nil: the default summary) after
// delay (or until the request is cancelled).
func (s *Server) Script(reply Reply, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply, s.replyTo, s.delay = reply, nil, delay
}

// Hold makes every following request wait until release is called; arrived receives one
// value per request as it arrives.
func (s *Server) Hold() (arrived <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrived, s.release = make(chan struct{}, 64), make(chan struct{})
	rel := s.release
	var once sync.Once
	return s.arrived, func() { once.Do(func() { close(rel) }) }
}

// Body returns the request body of call n (1-based), or "".
func (s *Server) Body(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 1 || n > len(s.bodies) {
		return ""
	}
	return s.bodies[n-1]
}

// readJSON reads r's body and decodes it as a T; when it cannot, it answers 400 Bad Request
// and reports false.
func readJSON[T any](w http.ResponseWriter, r *http.Request) (T, []byte, bool) {
	var v T
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &v)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return v, nil, false
	}
	return v, body, true
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	anthropic := strings.HasSuffix(r.URL.Path, "/v1/messages")
	responses := strings.HasSuffix(r.URL.Path, "/responses")
	if r.Method != http.MethodPost || !(anthropic || responses || strings.HasSuffix(r.URL.Path, "/chat/completions")) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	req, body, ok := readJSON[request](w, r)
	if !ok {
		return
	}
	prompt := req.prompt()
	n := s.calls.Add(1)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(body))
	s.prompts = append(s.prompts, prompt)
	reply, replyTo, delay, arrived, release, bound := s.reply, s.replyTo, s.delay, s.arrived, s.release, s.bound
	s.mu.Unlock()
	if bound > 0 {
		s.measure(n, prompt, bound)
	}
	if arrived != nil {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	status, text := 0, fmt.Sprintf("SUMMARY-%d: the user asked for the tasks quoted above; next step: continue.", n)
	switch {
	case replyTo != nil:
		status, text = replyTo(n, prompt)
	case reply != nil:
		status, text = reply(n)
	}
	w.Header().Set("Content-Type", "application/json")
	if status != 0 && status != http.StatusOK {
		w.WriteHeader(status)
		if anthropic {
			fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"scripted %d"}}`, status)
			return
		}
		fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"server_error","code":null,"param":null}}`, status)
		return
	}
	if anthropic {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": req.Model,
			"content":     []map[string]any{{"type": "text", "text": text}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": len(body) / 4, "output_tokens": len(text) / 4},
		})
		return
	}
	if responses {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1, "status": "completed", "model": req.Model,
			"output": []any{map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", n), "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}},
			"usage": map[string]any{"input_tokens": len(body) / 4, "output_tokens": len(text) / 4, "total_tokens": (len(body) + len(text)) / 4},
		})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": len(body) / 4, "completion_tokens": len(text) / 4, "total_tokens": (len(body) + len(text)) / 4},
	})
}

// measure counts the input tokens of call n's prompt, records the largest, and fails the
// test when they exceed bound.
func (s *Server) measure(n int64, prompt string, bound int) {
	enc, err := tokenizer.New(tokenizer.O200k)
	if err != nil {
		s.tb.Errorf("llmtest: %v", err)
		return
	}
	tokens := int(enc.Count(prompt))
	s.mu.Lock()
	s.largest = max(s.largest, tokens)
	s.mu.Unlock()
	if tokens > bound {
		s.tb.Errorf("llmtest: call %d has %d input tokens, over the bound of %d", n, tokens, bound)
	}
}

// request is what the server reads of a chat completions, Responses or Messages request.
type request struct {
	Model        string          `json:"model"`
	System       json.RawMessage `json:"system"`       // Anthropic: a string or text blocks
	Instructions json.RawMessage `json:"instructions"` // Responses: a string
	Messages     []struct {
		Content json.RawMessage `json:"content"` // a string or text blocks
	} `json:"messages"`
	Input json.RawMessage `json:"input"` // Responses: a string or items
}

// prompt is the request's texts (its system prompt or instructions, then its messages or
// input items), joined by new lines.
func (r request) prompt() string {
	var parts []string
	for _, raw := range append([]json.RawMessage{r.System, r.Instructions}, contents(r)...) {
		if t := texts(raw); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// contents are the content values of r's messages, or of its input: a string input is its
// one content, an item list each item's content.
func contents(r request) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(r.Messages))
	for _, m := range r.Messages {
		out = append(out, m.Content)
	}
	var items []struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(r.Input, &items) == nil {
		for _, it := range items {
			out = append(out, it.Content)
		}
	} else if len(r.Input) > 0 {
		out = append(out, r.Input)
	}
	return out
}

// texts reads a content value: a string, or blocks of which the text ones count.
func texts(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	out := make([]string, 0, len(blocks))
	for _, b := range blocks {
		out = append(out, b.Text)
	}
	return strings.Join(out, "\n")
}
