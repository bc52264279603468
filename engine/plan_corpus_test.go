package engine

import (
	"encoding/json"
	"fmt"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
)

// A test-only reader for the corpus's two request shapes, so that the planner's tests do not
// depend on engine/format. It maps only what planning needs: roles, text, tool calls and
// results.

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type anMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentText reads a string or a list of text blocks.
func contentText(raw json.RawMessage) (string, []anBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil, nil
	}
	var blocks []anBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", nil, err
	}
	return "", blocks, nil
}

func joinText(s string, blocks []anBlock) string {
	for _, b := range blocks {
		if b.Type == "text" {
			if s != "" {
				s += "\n"
			}
			s += b.Text
		}
	}
	return s
}

func readOpenAI(body []byte) ([]*compactorv1.Message, error) {
	var req struct {
		Messages []oaMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var out []*compactorv1.Message
	for i, m := range req.Messages {
		s, blocks, err := contentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		s = joinText(s, blocks)
		switch m.Role {
		case "system", "developer":
			out = append(out, plSysMsg(s))
		case "user":
			out = append(out, plUserMsg(s))
		case "assistant":
			var parts []*compactorv1.Part
			if s != "" || len(m.ToolCalls) == 0 {
				parts = append(parts, plText(s))
			}
			for _, tc := range m.ToolCalls {
				parts = append(parts, plCall(tc.ID, tc.Function.Name, tc.Function.Arguments))
			}
			out = append(out, plAsstMsg(parts...))
		case "tool":
			out = append(out, plToolMsg(plResult(m.ToolCallID, m.Name, s)))
		default:
			return nil, fmt.Errorf("messages[%d]: role %q", i, m.Role)
		}
	}
	return out, nil
}

func readAnthropic(body []byte) ([]*compactorv1.Message, error) {
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []anMessage     `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var out []*compactorv1.Message
	if s, blocks, err := contentText(req.System); err != nil {
		return nil, err
	} else if s = joinText(s, blocks); s != "" {
		out = append(out, plSysMsg(s))
	}
	for i, m := range req.Messages {
		s, blocks, err := contentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		if s != "" {
			blocks = append([]anBlock{{Type: "text", Text: s}}, blocks...)
		}
		var texts, calls, results []*compactorv1.Part
		for _, b := range blocks {
			switch b.Type {
			case "text":
				texts = append(texts, plText(b.Text))
			case "tool_use":
				calls = append(calls, plCall(b.ID, b.Name, string(b.Input)))
			case "tool_result":
				rs, rb, err := contentText(b.Content)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: tool_result: %w", i, err)
				}
				out := &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: joinText(rs, rb)}}
				if b.IsError {
					out.Value = &compactorv1.ToolOutput_ErrorText{ErrorText: joinText(rs, rb)}
				}
				results = append(results, &compactorv1.Part{Content: &compactorv1.Part_ToolResult{
					ToolResult: &compactorv1.ToolResultPart{ToolCallId: b.ToolUseID, Output: out}}})
			}
		}
		switch m.Role {
		case "user":
			if len(results) > 0 {
				out = append(out, plToolMsg(results...))
			}
			if len(texts) > 0 {
				out = append(out, plMsg(compactorv1.Role_ROLE_USER, texts...))
			}
		case "assistant":
			out = append(out, plAsstMsg(append(texts, calls...)...))
		default:
			return nil, fmt.Errorf("messages[%d]: role %q", i, m.Role)
		}
	}
	return out, nil
}

func readCorpusFile(tb testing.TB, f corpus.File) []*compactorv1.Message {
	tb.Helper()
	body := corpus.Read(tb, f)
	var msgs []*compactorv1.Message
	var err error
	if f.Format == "anthropic" {
		msgs, err = readAnthropic(body)
	} else {
		msgs, err = readOpenAI(body)
	}
	if err != nil {
		tb.Fatalf("%s: %v", f.Name, err)
	}
	return msgs
}

// TestPlanCorpus plans every real conversation at several window sizes: either a plan whose
// invariants hold and whose reason quotes true numbers, or an irreducible error that says by
// how much the floor exceeds the window.
func TestPlanCorpus(t *testing.T) {
	c := NewCounter(0)
	windows := []int64{8000, 32000, 128000, 200000}
	for _, f := range corpus.Files(t) {
		msgs := readCorpusFile(t, f)
		if err := DefaultLimits().Validate(msgs); err != nil {
			t.Errorf("%s: %v", f.Name, err)
			continue
		}
		for _, w := range windows {
			for _, tok := range []string{"o200k_base", "cl100k_base"} {
				if testing.Short() && tok != "o200k_base" {
					continue
				}
				p := &compactorv1.Policy{ContextWindow: w, Tokenizer: tok}
				t.Run(fmt.Sprintf("%s/%d/%s", f.Name, w, tok), func(t *testing.T) {
					d, err := Decide(msgs, p, c, Options{})
					if err != nil {
						checkIrreducible(t, msgs, p, c, err)
						t.Logf("irreducible: %v", err)
						return
					}
					checkInvariants(t, msgs, p, d)
					t.Logf("%v: %s", d.Response.Action, d.Response.Reason)
				})
			}
		}
	}
}
