package engine

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
)

// update rewrites golden files: go test ./engine -run <Test> -update
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/<name>, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update after checking the change):\n--- got\n%s", path, got)
	}
}

// Helpers that build IR messages for tests.

func sumText(s string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}
}

func sumMsg(role compactorv1.Role, parts ...*compactorv1.Part) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: parts}
}

func sumUser(s string) *compactorv1.Message { return sumMsg(compactorv1.Role_ROLE_USER, sumText(s)) }
func sumAssistant(s string, calls ...*compactorv1.Part) *compactorv1.Message {
	parts := calls
	if s != "" {
		parts = append([]*compactorv1.Part{sumText(s)}, calls...)
	}
	return sumMsg(compactorv1.Role_ROLE_ASSISTANT, parts...)
}

func sumCall(id, name, input string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{
		ToolCallId: id, ToolName: name, InputJson: input}}}
}

func sumResult(id, name string, out *compactorv1.ToolOutput) *compactorv1.Message {
	return sumMsg(compactorv1.Role_ROLE_TOOL, &compactorv1.Part{Content: &compactorv1.Part_ToolResult{
		ToolResult: &compactorv1.ToolResultPart{ToolCallId: id, ToolName: name, Output: out}}})
}

func outText(s string) *compactorv1.ToolOutput {
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: s}}
}

func outError(s string) *compactorv1.ToolOutput {
	return &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_ErrorText{ErrorText: s}}
}

// sumReadOpenAIChat reads an OpenAI Chat Completions request body ({"messages": [...]}) into
// IR messages. Test-only: it handles what the corpus uses (string / null / text-part
// content, tool_calls, tool messages), not the whole format.
func sumReadOpenAIChat(t testing.TB, body []byte) []*compactorv1.Message {
	t.Helper()
	var req struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			Name       string          `json:"name"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	out := make([]*compactorv1.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		var text string
		if len(m.Content) > 0 && string(m.Content) != "null" {
			if err := json.Unmarshal(m.Content, &text); err != nil {
				var parts []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				if err := json.Unmarshal(m.Content, &parts); err != nil {
					t.Fatalf("messages[%d].content: %v", i, err)
				}
				var b []string
				for _, p := range parts {
					if p.Type == "text" {
						b = append(b, p.Text)
					}
				}
				text = strings.Join(b, "\n")
			}
		}
		switch m.Role {
		case "system", "developer":
			out = append(out, sumMsg(compactorv1.Role_ROLE_SYSTEM, sumText(text)))
		case "user":
			out = append(out, sumUser(text))
		case "assistant":
			var calls []*compactorv1.Part
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
				calls = append(calls, sumCall(c.ID, c.Function.Name, c.Function.Arguments))
			}
			out = append(out, sumAssistant(text, calls...))
		case "tool":
			name := m.Name
			if name == "" {
				name = names[m.ToolCallID]
			}
			out = append(out, sumResult(m.ToolCallID, name, outText(text)))
		default:
			t.Fatalf("messages[%d]: role %q", i, m.Role)
		}
	}
	return out
}

func TestSummaryTextRoundTripsTheFraming(t *testing.T) {
	tests := []struct {
		name string
		msg  *compactorv1.Message
		want string
	}{
		{"framed", SummaryMessage("  ## User requests\n- fix the bug\n", 12), "## User requests\n- fix the bug"},
		{"framed summary that mentions the closing tag", SummaryMessage("a </summary> b", 3), "a </summary> b"},
		{"foreign summary kept whole", sumUser("Summary written elsewhere.\n<summary>x</summary>"), "Summary written elsewhere.\n<summary>x</summary>"},
		{"empty", &compactorv1.Message{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SummaryText(tt.msg); got != tt.want {
				t.Errorf("SummaryText = %q, want %q", got, tt.want)
			}
		})
	}
	m := SummaryMessage("s", 42)
	if m.GetRole() != compactorv1.Role_ROLE_USER || m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
		t.Errorf("SummaryMessage role %v kind %v", m.GetRole(), m.GetKind())
	}
	txt := m.GetParts()[0].GetText().GetText()
	if !strings.HasPrefix(txt, "This session continues from an earlier conversation that was compacted") || !strings.Contains(txt, "(42 messages)") {
		t.Errorf("framing does not say the session continues from a summary: %q", txt)
	}
}

func TestSummaryPrompt(t *testing.T) {
	pinned := sumUser("PINNED PROJECT RULES")
	pinned.Pinned = true
	msgs := []*compactorv1.Message{sumMsg(compactorv1.Role_ROLE_SYSTEM, sumText("SYSTEM PROMPT")), pinned, sumUser("Rename `Foo` to `Bar` in pkg/a.go")}
	tests := []struct {
		name     string
		in       SummaryInput
		contains []string
		absent   []string
	}{
		{
			name:     "plain",
			in:       SummaryInput{Messages: msgs},
			contains: []string{"<transcript>\n[user]\nRename `Foo` to `Bar` in pkg/a.go\n", "Summarize the transcript"},
			absent:   []string{"<previous-summary>", "<instructions>", "SYSTEM PROMPT", "PINNED PROJECT RULES"},
		},
		{
			name:     "anchored with instructions",
			in:       SummaryInput{Messages: msgs, Anchor: "earlier: user wants Go 1.26", Instructions: "focus on the API"},
			contains: []string{"<previous-summary>\nearlier: user wants Go 1.26\n</previous-summary>", "covers both the previous summary and the transcript", "<instructions>\nfocus on the API\n</instructions>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SummaryPrompt(tt.in, TranscriptOptions{})
			for _, s := range SummarySections {
				if !strings.Contains(got, s.Heading+": ") {
					t.Errorf("prompt lacks section %q", s.Heading)
				}
			}
			for _, s := range tt.contains {
				if !strings.Contains(got, s) {
					t.Errorf("prompt lacks %q:\n%s", s, got)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(got, s) {
					t.Errorf("prompt has %q", s)
				}
			}
		})
	}
	if !strings.Contains(SummarySystemPrompt(), "verbatim") {
		t.Error("system prompt does not ask for verbatim quotes")
	}
}

func TestTranscriptRendersEveryPartKind(t *testing.T) {
	long := "line 1\n" + strings.Repeat("noise\n", 2000) + "FAILED: test_x\n"
	msgs := []*compactorv1.Message{
		sumMsg(compactorv1.Role_ROLE_SYSTEM, sumText("You are helpful.")),
		sumMsg(compactorv1.Role_ROLE_USER, sumText("Look at this"),
			&compactorv1.Part{Content: &compactorv1.Part_Image{Image: &compactorv1.ImagePart{MediaType: "image/png", Source: &compactorv1.ImagePart_Data{Data: []byte{1, 2}}}}},
			&compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{Filename: "notes.txt", MediaType: "text/plain", Source: &compactorv1.FilePart_Data{Data: []byte("remember the milk")}}}}),
		sumMsg(compactorv1.Role_ROLE_ASSISTANT,
			&compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: "SECRET THOUGHTS"}}},
			sumText("Running the tests."),
			sumCall("c1", "bash", `{"command":"go test ./..."}`)),
		sumResult("c1", "bash", outText(long)),
		sumAssistant("", sumCall("c2", "read", `{"path":"missing.go"}`)),
		sumResult("c2", "read", outError("open missing.go: no such file")),
		sumMsg(compactorv1.Role_ROLE_ASSISTANT, &compactorv1.Part{Content: &compactorv1.Part_ApprovalRequest{ApprovalRequest: &compactorv1.ToolApprovalRequest{ApprovalId: "a1", ToolCallId: "c3"}}}),
		sumMsg(compactorv1.Role_ROLE_TOOL, &compactorv1.Part{Content: &compactorv1.Part_ApprovalResponse{ApprovalResponse: &compactorv1.ToolApprovalResponse{ApprovalId: "a1", Reason: "too risky"}}}),
		{Role: compactorv1.Role_ROLE_USER, Kind: compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, Parts: []*compactorv1.Part{sumText("PROMPT TEXT")}},
	}
	got := Transcript(msgs, TranscriptOptions{MaxToolOutputBytes: 300})
	for _, absent := range []string{"SECRET THOUGHTS", "PROMPT TEXT"} {
		if strings.Contains(got, absent) {
			t.Errorf("transcript contains %q", absent)
		}
	}
	if len(got) > 2000 {
		t.Errorf("transcript is %d bytes: the long tool output was not capped", len(got))
	}
	golden(t, "summary/transcript.golden", got)
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name     string
		s        string
		max      int
		want     string // exact, when set
		contains []string
	}{
		{name: "short", s: "hello", max: 10, want: "hello"},
		{name: "exact", s: "hello", max: 5, want: "hello"},
		{name: "no limit", s: "hello", max: 0, want: "hello"},
		{name: "head and tail", s: strings.Repeat("a", 100) + strings.Repeat("z", 100), max: 30, contains: []string{"aaaaaaaaaaaaaaaaaaaa", "zzzzzzzzzz", "bytes omitted"}},
		{name: "multibyte", s: strings.Repeat("é", 100), max: 31, contains: []string{"é", "bytes omitted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.s, tt.max)
			if tt.want != "" && got != tt.want {
				t.Errorf("Truncate = %q, want %q", got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Truncate = %q: invalid UTF-8", got)
			}
			for _, c := range tt.contains {
				if !strings.Contains(got, c) {
					t.Errorf("Truncate = %q, lacks %q", got, c)
				}
			}
			if tt.want == "" && len(got) >= len(tt.s) {
				t.Errorf("Truncate did not shorten: %d → %d bytes", len(tt.s), len(got))
			}
		})
	}
}

func TestFitSummaryPrompt(t *testing.T) {
	f := corpus.Largest(t)
	if f.Format != "openai" {
		t.Skipf("largest corpus file %s is not OpenAI-shaped", f.Name)
	}
	msgs := sumReadOpenAIChat(t, corpus.Read(t, f))
	in := SummaryInput{Messages: msgs, Anchor: "ANCHOR TEXT", Instructions: "INSTRUCTIONS TEXT"}
	full := SummaryPrompt(in, TranscriptOptions{})
	if got := FitSummaryPrompt(in, 0); got != full {
		t.Error("FitSummaryPrompt without a bound differs from SummaryPrompt")
	}
	if got := FitSummaryPrompt(in, len(full)); got != full {
		t.Error("FitSummaryPrompt shrank a prompt that fits")
	}
	first := sumPrefix(sumFirstUserText(msgs), 40)
	for _, max := range []int{len(full) / 2, 60000, 20000, 5000} {
		got := FitSummaryPrompt(in, max)
		if len(got) > max {
			t.Errorf("max %d: prompt is %d bytes", max, len(got))
		}
		for _, want := range []string{"ANCHOR TEXT", "INSTRUCTIONS TEXT", "<transcript>", "Next step", first} {
			if !strings.Contains(got, want) {
				t.Errorf("max %d: prompt lacks %q", max, want)
			}
		}
	}
}

// FuzzTruncate: the result is valid UTF-8 when the input is, never longer than the input
// plus the marker, and s itself when it fits.
func FuzzTruncate(f *testing.F) {
	f.Add("hello world", 5)
	f.Add(strings.Repeat("é\n", 50), 17)
	f.Add("\xff\xfe", 1)
	f.Fuzz(func(t *testing.T, s string, max int) {
		got := Truncate(s, max)
		if max <= 0 || len(s) <= max {
			if got != s {
				t.Fatalf("Truncate(%q, %d) = %q, want it unchanged", s, max, got)
			}
			return
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q: invalid UTF-8", s, max, got)
		}
		if len(got) > max+48 {
			t.Fatalf("Truncate(%q, %d) is %d bytes", s, max, len(got))
		}
	})
}
